// OptionsFromEnvironment: how an engine that knows nothing of nanokv (or was
// written for kvcached) attaches by itself. Each variable is read once, here.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "ipc/wire/codec.h"
#include "base/human_size.h"
#include "nanokv/client.h"

namespace nanokv {
namespace {

struct EnvVar {
  const char* name;
  std::string value;
};

// The first of `names` that is set to a non-empty value: a NANOKV_* name is
// listed before its KVCACHED_* alias, so it wins when both are set.
std::optional<EnvVar> Lookup(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return EnvVar{name, value};
  }
  return std::nullopt;
}

Status Malformed(const EnvVar& var, std::string_view why) {
  return Status::InvalidArgument(std::string(var.name) + "='" + var.value.substr(0, 80) +
                                 "': " + std::string(why));
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Result<bool> ParseBool(const EnvVar& var) {
  std::string v = Lower(var.value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return Malformed(var, "expected 1/true/yes/on or 0/false/no/off");
}

// A whole decimal number, nothing before or after it.
Result<double> ParseNumber(const EnvVar& var) {
  const char* begin = var.value.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (end == begin || *end != '\0' || errno == ERANGE || !std::isfinite(value)) {
    return Malformed(var, "not a number");
  }
  return value;
}

Result<spdlog::level::level_enum> ParseLogLevel(const EnvVar& var) {
  // spdlog's own from_str maps every unknown name to "off", which would
  // silence a typo; so the names are checked here.
  std::string v = Lower(var.value);
  if (v == "trace") return spdlog::level::trace;
  if (v == "debug") return spdlog::level::debug;
  if (v == "info") return spdlog::level::info;
  if (v == "warn" || v == "warning") return spdlog::level::warn;
  if (v == "error" || v == "err") return spdlog::level::err;
  if (v == "critical") return spdlog::level::critical;
  if (v == "off") return spdlog::level::off;
  return Malformed(var, "expected trace, debug, info, warn, error, critical or off");
}

Result<std::string> ParseName(const EnvVar& var) {
  if (!wire::ValidName(var.value)) return Malformed(var, "not 1-63 of [A-Za-z0-9_.:@-]");
  return var.value;
}

}  // namespace

Result<std::optional<ClientOptions>> OptionsFromEnvironment() {
  auto enable = Lookup({"ENABLE_NANOKV", "ENABLE_KVCACHED"});
  if (!enable) return std::optional<ClientOptions>();
  NANOKV_ASSIGN_OR_RETURN(bool enabled, ParseBool(*enable));
  if (!enabled) return std::optional<ClientOptions>();

  ClientOptions options;
  if (auto var = Lookup({"NANOKV_IPC_NAME", "KVCACHED_IPC_NAME"})) {
    if (!ipc::ValidIpcName(var->value)) return Malformed(*var, "not 1-48 of [A-Za-z0-9_.-]");
    options.ipc_name = var->value;
  }

  if (auto var = Lookup({"NANOKV_LIMIT"})) {
    auto limit = ParseSizeOrShare(var->value);
    if (!limit.ok()) return Malformed(*var, limit.status().message());
    if (limit->is_fraction()) {
      options.limit_fraction = limit->fraction;
    } else if (limit->bytes == 0) {
      return Malformed(*var, "a limit of 0 bytes");
    } else {
      options.limit_bytes = limit->bytes;
    }
  } else if (auto utilization = Lookup({"KVCACHED_GPU_UTILIZATION"})) {
    NANOKV_ASSIGN_OR_RETURN(double fraction, ParseNumber(*utilization));
    if (!(fraction > 0 && fraction <= 1))
      return Malformed(*utilization, "not a fraction in (0, 1]");
    options.limit_device_fraction = fraction;  // of the engine's GPU, as kvcached means it
  }

  if (auto var = Lookup({"NANOKV_GROUP"})) {
    NANOKV_ASSIGN_OR_RETURN(options.group, ParseName(*var));
  }
  if (auto var = Lookup({"NANOKV_TENANT"})) {
    NANOKV_ASSIGN_OR_RETURN(options.tenant, ParseName(*var));
  }

  if (auto var = Lookup({"NANOKV_PAGE_SIZE"})) {
    auto bytes = ParseBytes(var->value);
    if (!bytes.ok()) return Malformed(*var, bytes.status().message());
    if (*bytes == 0) return Malformed(*var, "a page size of 0 bytes");
    options.expect_page_bytes = static_cast<size_t>(*bytes);
  } else if (auto mib = Lookup({"KVCACHED_PAGE_SIZE_MB"})) {
    NANOKV_ASSIGN_OR_RETURN(double value, ParseNumber(*mib));
    // kvcached's page sizes are whole MiB; a fraction is a typo, not a size.
    if (!(value >= 1 && value <= 1 << 20) || value != std::floor(value)) {
      return Malformed(*mib, "not a whole number of MiB in [1, 1048576]");
    }
    options.expect_page_bytes = static_cast<size_t>(value) << 20;
  }

  if (auto var = Lookup({"NANOKV_LOG_LEVEL"})) {
    NANOKV_ASSIGN_OR_RETURN(spdlog::level::level_enum level, ParseLogLevel(*var));
    spdlog::set_level(level);
  }
  return std::optional<ClientOptions>(std::move(options));
}

}  // namespace nanokv
