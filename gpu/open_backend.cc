// Backend selection: by name, or "auto" (the first GPU backend that finds a
// VMM-capable device, else host). Why a GPU backend was passed over is logged,
// so "why am I on host?" has an answer in the engine's log.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>

#include "gpu/backend.h"
#include "base/human_size.h"

namespace nanokv::gpu {

Result<int> Backend::ExportReadOnly(int exported_fd) {
  // The GPU drivers' fds cannot be narrowed: a duplicate, documented as such.
  int fd = fcntl(exported_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("fcntl(F_DUPFD_CLOEXEC)", errno, "ExportReadOnly");
  return fd;
}

HostBackendOptions HostOptionsFromEnvironment() {
  HostBackendOptions options;
  if (const char* devices = std::getenv("NANOKV_HOST_DEVICES")) {
    int n = std::atoi(devices);
    if (n > 0) options.devices = n;
  }
  if (const char* visible = std::getenv("NANOKV_HOST_VISIBLE_DEVICES"); visible && *visible) {
    // "1" or "1,0": physical indexes; the backend ends the list at the first
    // entry that is not a device, as CUDA does.
    std::string text(visible);
    size_t at = 0;
    while (at <= text.size()) {
      size_t comma = std::min(text.find(',', at), text.size());
      std::string item = text.substr(at, comma - at);
      char* end = nullptr;
      long index = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || index < 0 || index > 1024) {
        spdlog::warn("nanokv: NANOKV_HOST_VISIBLE_DEVICES='{}': '{}' is not a device index, the "
                     "list ends before it", text, item);
        break;
      }
      options.visible.push_back(static_cast<int>(index));
      at = comma + 1;
    }
  }
  if (const char* memory = std::getenv("NANOKV_HOST_DEVICE_MEMORY")) {
    auto bytes = ParseBytes(memory);
    if (bytes.ok()) {
      options.device_bytes = *bytes;
    } else {
      spdlog::warn("nanokv: ignoring NANOKV_HOST_DEVICE_MEMORY: {}", bytes.status().ToString());
    }
  }
  return options;
}

Result<int> FindDeviceByUuid(Backend& backend, std::string_view uuid) {
  if (!uuid.empty()) {
    for (int device = 0; device < backend.device_count(); ++device) {
      auto mine = backend.GetDeviceUuid(device);
      if (mine.ok() && *mine == uuid) return device;
    }
  }
  return Status::NotFound("no " + std::string(backend.name()) + " device with uuid '" +
                          std::string(uuid) + "' is visible to this process (" +
                          std::to_string(backend.device_count()) + " devices)");
}

Result<int> LocalOrdinal(Backend& backend, int kvd_device, std::string_view uuid) {
  if (uuid.empty() && kvd_device >= 0 && kvd_device < backend.device_count()) return kvd_device;
  if (!uuid.empty()) {
    auto found = FindDeviceByUuid(backend, uuid);
    if (found.ok()) return found;
  }
  std::string which = "kvd's device " + std::to_string(kvd_device);
  if (!uuid.empty()) which += " (" + std::string(uuid) + ")";
  return Status::NotFound(which + " is not visible to this process (" +
                          std::to_string(backend.device_count()) +
                          " devices here; CUDA_VISIBLE_DEVICES or another device mask?)");
}

Result<std::unique_ptr<Backend>> OpenBackend(std::string_view name,
                                             const HostBackendOptions& host_options) {
  std::string chosen(name);
  if (chosen.empty()) {
    const char* env = std::getenv("NANOKV_BACKEND");
    chosen = env != nullptr && *env != '\0' ? env : "auto";
  }
  if (chosen == "host") return MakeHostBackend(host_options);
  if (chosen == "cuda") return MakeCudaBackend();
  if (chosen == "hip") return MakeHipBackend();
  if (chosen != "auto") {
    return Status::InvalidArgument("unknown backend '" + chosen +
                                   "' (expected auto, host, cuda or hip)");
  }
  auto cuda = MakeCudaBackend();
  if (cuda.ok()) return cuda;
  spdlog::debug("nanokv: cuda backend not used: {}", cuda.status().ToString());
  auto hip = MakeHipBackend();
  if (hip.ok()) return hip;
  spdlog::debug("nanokv: hip backend not used: {}", hip.status().ToString());
  return MakeHostBackend(host_options);
}

}  // namespace nanokv::gpu
