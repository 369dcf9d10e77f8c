#include "gpu/driver_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace nanokv::gpu {

std::string FormatGpuUuid(const unsigned char (&b)[16]) {
  return fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
                     "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                     b[12], b[13], b[14], b[15]);
}

Status DriverBackend::CheckDevice(int device) const {
  if (device < 0 || device >= device_count()) {
    return Status::NotFound(
        fmt::format("no {} device {} ({} visible)", vendor_, device, device_count()));
  }
  return Status::OK();
}

Result<PageHandle> DriverBackend::CreatePage(int device, size_t size) {
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  NANOKV_ASSIGN_OR_RETURN(size_t granularity, ReadyDevice(device));
  NANOKV_RETURN_IF_ERROR(CheckMultipleOfGranularity("CreatePage", size, granularity));
  NANOKV_ASSIGN_OR_RETURN(uint64_t handle, MemCreate(device, size));
  std::lock_guard<std::mutex> lock(mu_);
  (void)registry_.AddPageReference(handle, device, size);  // a new handle: never refused
  return PageHandle{handle};
}

Result<int> DriverBackend::ExportPage(PageHandle page) {
  int device = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(const VmmRegistry::Page* held, registry_.FindPage(page, "ExportPage"));
    device = held->device;
  }
  NANOKV_ASSIGN_OR_RETURN(int fd, MemExport(device, page.value));
  // The driver does not promise close-on-exec; an fd leaking into a child
  // would keep the page's memory alive there.
  int flags = fcntl(fd, F_GETFD);
  if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    Status status = Status::FromErrno("fcntl(F_SETFD)", errno, "ExportPage");
    close(fd);
    return status;
  }
  return fd;
}

Result<PageHandle> DriverBackend::ImportPage(int fd, int device, size_t size) {
  Result<PageHandle> page = ImportFromFd(fd, device, size);
  // Ours whatever happened (backend.h); the driver holds its own reference.
  if (fd >= 0) close(fd);
  return page;
}

Result<PageHandle> DriverBackend::ImportFromFd(int fd, int device, size_t size) {
  if (fd < 0) return Status::InvalidArgument(fmt::format("ImportPage: bad fd {}", fd));
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  NANOKV_ASSIGN_OR_RETURN(size_t granularity, ReadyDevice(device));
  NANOKV_RETURN_IF_ERROR(CheckMultipleOfGranularity("ImportPage", size, granularity));
  NANOKV_ASSIGN_OR_RETURN(uint64_t handle, MemImport(fd, device, size));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (registry_.AddPageReference(handle, device, size)) return PageHandle{handle};
  }
  // The driver gave back a page we hold, and we know its size: not `size`.
  Status release = MemRelease(device, handle);
  if (!release.ok()) spdlog::warn("nanokv: undoing a mismatched import: {}", release.ToString());
  return Status::InvalidArgument(
      fmt::format("ImportPage: fd is a page of another size, not {} bytes", size));
}

Status DriverBackend::ReleasePage(PageHandle page) {
  int device = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(device, registry_.DropPageReference(page, "ReleasePage"));
  }
  return MemRelease(device, page.value);
}

Result<uintptr_t> DriverBackend::ReserveRange(size_t size, size_t alignment) {
  int device = AmbientDevice();
  NANOKV_ASSIGN_OR_RETURN(size_t granularity, ReadyDevice(device));
  NANOKV_RETURN_IF_ERROR(CheckMultipleOfGranularity("ReserveRange", size, granularity));
  NANOKV_RETURN_IF_ERROR(CheckReserveAlignment(alignment));
  // Mappings need granularity-aligned addresses, so never align less.
  alignment = std::max(alignment, granularity);
  NANOKV_ASSIGN_OR_RETURN(uintptr_t base, AddressReserve(device, size, alignment));
  std::lock_guard<std::mutex> lock(mu_);
  registry_.AddRange(base, {size, granularity});
  return base;
}

Status DriverBackend::FreeRange(uintptr_t base, size_t size) {
  VmmRegistry::Range range;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(range, registry_.TakeRange(base, size));
  }
  Status status = AddressFree(base, size);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    registry_.AddRange(base, range);
  }
  return status;
}

Status DriverBackend::Map(uintptr_t address, size_t size, PageHandle page) {
  VmmRegistry::Page held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(const VmmRegistry::Page* found, registry_.FindPage(page, "Map"));
    held = *found;
  }
  // Ready since the page was created or imported on it: this only reads.
  NANOKV_ASSIGN_OR_RETURN(size_t granularity, ReadyDevice(held.device));
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_RETURN_IF_ERROR(registry_.ClaimMapping({.address = address,
                                                   .size = size,
                                                   .page = page.value,
                                                   .device = held.device,
                                                   .page_bytes = held.size,
                                                   .granularity = granularity}));
  }
  Status status = MemMap(held.device, address, size, page.value);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    registry_.DropMapping(address);
  }
  return status;
}

Status DriverBackend::SetAccess(uintptr_t address, size_t size, std::span<const int> devices,
                                Access access) {
  uint64_t grant = 0;
  for (int device : devices) {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    NANOKV_RETURN_IF_ERROR(ReadyDevice(device).status());
    grant |= uint64_t{1} << device;
  }
  uint64_t had = 0;
  int context_device = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(auto run, registry_.WholeMappings("SetAccess", address, size));
    for (const VmmRegistry::Mapping* mapping : run) had |= mapping->access;
    context_device = run.front()->device;
  }
  // The result is exactly `devices`, as on the host backend: the driver only
  // changes the locations it is given, so the others that had access are
  // named too, to revoke theirs.
  const uint64_t changed = grant | had;
  if (changed == 0) return Status::OK();
  const bool read_only = access == Access::kReadOnly;
  NANOKV_RETURN_IF_ERROR(MemSetAccess(context_device, address, size, changed, grant, read_only));
  std::lock_guard<std::mutex> lock(mu_);
  registry_.SetAccess(address, size, grant, read_only);
  return Status::OK();
}

Result<bool> DriverBackend::HasAccess(uintptr_t address, int device) {
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  int context_device = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const VmmRegistry::Mapping* mapping = registry_.FindMapping(address)) {
      context_device = mapping->device;
    } else if (registry_.InsideRange(address, 1)) {
      return Status::InvalidArgument(fmt::format("HasAccess: {} is not mapped", Hex(address)));
    }
  }
  // Outside our ranges the driver is the only one who knows.
  if (context_device < 0) context_device = AmbientDevice();
  return MemGetAccess(context_device, address, device);
}

Status DriverBackend::Unmap(uintptr_t address, size_t size) {
  VmmRegistry::TakenMappings taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(taken, registry_.TakeMappings("Unmap", address, size));
  }
  Status status = MemUnmap(taken.front().second.device, address, size);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    registry_.RestoreMappings(taken);
  }
  return status;
}

Status DriverBackend::Copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  CountDeviceWork();
  if (bytes == 0) return Status::OK();
  if (dst == nullptr || src == nullptr) return Status::InvalidArgument("Copy: null address");
  NANOKV_ASSIGN_OR_RETURN(int device, CopyDevice("Copy", dst, src, bytes, kind));
  return Memcpy(device, dst, src, bytes, kind);
}

Status DriverBackend::Fill(void* dst, uint8_t value, size_t bytes) {
  CountDeviceWork();
  if (bytes == 0) return Status::OK();
  if (dst == nullptr) return Status::InvalidArgument("Fill: null address");
  NANOKV_ASSIGN_OR_RETURN(int device,
                          CopyDevice("Fill", dst, nullptr, bytes, CopyKind::kHostToDevice));
  return Memset(device, dst, value, bytes);
}

Result<StreamHandle> DriverBackend::CreateStream(int device) {
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  NANOKV_RETURN_IF_ERROR(ReadyDevice(device).status());
  NANOKV_ASSIGN_OR_RETURN(uint64_t native, StreamCreate(device));
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_stream_++;
  streams_[id] = {device, native};
  return StreamHandle{id};
}

Status DriverBackend::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, StreamHandle stream) {
  CountStreamCopy();
  Stream held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(held, FindStreamLocked("CopyAsync", stream));
    if (bytes == 0) return Status::OK();
    if (dst == nullptr || src == nullptr) return Status::InvalidArgument("CopyAsync: null address");
    // Copy's checks, and the stream's device must reach the device ends: it
    // runs the copy (Copy may pick any device with access; a stream cannot).
    if (kind != CopyKind::kDeviceToHost) {
      NANOKV_RETURN_IF_ERROR(registry_.CheckSpan("CopyAsync", dst, bytes, /*write=*/true, held.device).status());
    }
    if (kind != CopyKind::kHostToDevice) {
      NANOKV_RETURN_IF_ERROR(registry_.CheckSpan("CopyAsync", src, bytes, /*write=*/false, held.device).status());
    }
  }
  return MemcpyAsync(held.device, dst, src, bytes, kind, held.native);
}

Status DriverBackend::SyncStream(StreamHandle stream) {
  Stream held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(held, FindStreamLocked("SyncStream", stream));
  }
  return StreamSynchronize(held.device, held.native);
}

Status DriverBackend::DestroyStream(StreamHandle stream) {
  Stream held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(held, FindStreamLocked("DestroyStream", stream));
    streams_.erase(stream.value);
  }
  Status status = StreamDestroy(held.device, held.native);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_[stream.value] = held;
  }
  return status;
}

Result<DriverBackend::Stream> DriverBackend::FindStreamLocked(const char* call, StreamHandle stream) const {
  auto it = streams_.find(stream.value);
  if (it == streams_.end()) {
    return Status::NotFound(
        fmt::format("{}: no stream handle {} (never created here, or destroyed)", call, stream.value));
  }
  return it->second;
}

Result<int> DriverBackend::CopyDevice(const char* call, const void* dst, const void* src,
                                      size_t bytes, CopyKind kind) {
  int device = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(device,
                            registry_.CopyDevice(call, dst, src, bytes, kind, device_count()));
  }
  return device >= 0 ? device : AmbientDevice();
}

void DriverBackend::ReleaseEverything() {
  auto log = [this](const Status& status) {
    if (!status.ok()) spdlog::warn("nanokv: {} teardown: {}", name(), status.ToString());
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, stream] : streams_) log(StreamDestroy(stream.device, stream.native));
  for (const auto& [address, mapping] : registry_.mappings()) {
    log(MemUnmap(mapping.device, address, mapping.size));
  }
  for (const auto& [handle, page] : registry_.pages()) {
    Status status;
    for (int i = 0; status.ok() && i < page.references; ++i) {
      status = MemRelease(page.device, handle);
    }
    log(status);
  }
  for (const auto& [base, range] : registry_.ranges()) log(AddressFree(base, range.size));
}

}  // namespace nanokv::gpu
