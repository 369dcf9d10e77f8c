// The YAML field reader moved to base/yaml_field.h (the master's config reads
// through it too, and master/ may not include daemon/). This header keeps
// code written against the old path compiling; include base/yaml_field.h.
#ifndef NANOKV_DAEMON_CONFIG_YAML_FIELD_H_
#define NANOKV_DAEMON_CONFIG_YAML_FIELD_H_
#include "base/yaml_field.h"
#endif  // NANOKV_DAEMON_CONFIG_YAML_FIELD_H_
