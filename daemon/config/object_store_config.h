// The `object_store:` section of kvd's config (configs/kvd.yaml documents it):
// how much of each device's pool kvd holds for the object store and how the
// store evicts. Parsed in its own file so the store's keys stay with the store.
#ifndef NANOKV_DAEMON_CONFIG_OBJECT_STORE_CONFIG_H_
#define NANOKV_DAEMON_CONFIG_OBJECT_STORE_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "base/human_size.h"
#include "base/yaml_field.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

enum class EvictionPolicy { kFifo, kLru };

struct ObjectStoreConfig {
  // Per device: bytes ("4GiB") or a share of the device's pool ("10%"). 0: no store.
  SizeOrShare size{0, 0};
  double high_watermark = 0.95;  // of the payload space: above it, a write evicts...
  double low_watermark = 0.85;   // ...down to here
  EvictionPolicy policy = EvictionPolicy::kLru;
  std::chrono::milliseconds lease_ttl{5000};      // a read lease ends by itself after this
  std::chrono::milliseconds write_timeout{30000};  // RESERVED/WRITING longer: reclaimed
  uint32_t max_objects = 0;  // per device; 0: one page of 64-byte headers
  // Read leases one client uid may hold at once (expired ones do not count):
  // without a bound a loop of acquires grows kvd without end.
  uint32_t max_leases = 1024;
  // v2 slabs (issue 34, object_index.h "Slabs"): a slab kvd granted and its
  // producer did not release ends by itself after this (what it never
  // announced goes back): a producer that hangs without closing its
  // connection cannot hold store space for good.
  std::chrono::milliseconds slab_ttl{60000};
  // Slabs one uid may hold at once, per store: each holds payload and
  // header slots nobody else can use until it ends.
  uint32_t max_slabs = 16;
  // Per device: bytes of kvd-owned host memory under the device's store
  // (the host tier, object_index.h). READY objects the store evicts move
  // there instead of going; 0: no host tier, eviction drops.
  uint64_t host_tier = 0;

  bool enabled() const { return size.is_fraction() || size.bytes != 0; }
};

// Reads the mapping `field` (key "object_store") into `out`, over what it
// holds. Errors: "<origin>:<line>: object_store.<field>: <what>".
Status ParseObjectStoreConfig(const YamlField& field, ObjectStoreConfig* out);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_OBJECT_STORE_CONFIG_H_
