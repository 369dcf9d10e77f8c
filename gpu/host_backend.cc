// The host backend: the GPU backend's contract on CPU memory, so every layer
// above runs in CI without a GPU. Not a mock: pages are real shared memory that
// crosses processes by fd, and the CUDA rules of backend.h are enforced here.
//
//   page     = a sealed memfd of page_bytes bytes (it cannot grow or shrink, so
//              a peer cannot SIGBUS the others by truncating a shared page)
//   export   = dup of the memfd           import  = an anchor mapping of the
//                                                   memfd (PROT_NONE), the
//                                                   fd closed: like CUDA's
//                                                   imported handle, it keeps
//                                                   the memory and no fd
//                                                   (so an engine's fds do
//                                                   not grow with its pages)
//   reserve  = mmap PROT_NONE             map     = mmap MAP_FIXED|MAP_SHARED,
//                                                   PROT_NONE until SetAccess
//   access   = mprotect read-write, or    unmap   = back to a PROT_NONE hole
//              PROT_READ (read-only)
//   read-only export = the memfd re-opened O_RDONLY (/proc/self/fd): it
//              cannot be mapped writable; pages are 0600, so another uid
//              holding it cannot re-open it writable through /proc either
//   map of an imported page = mremap of its anchor (old size 0: a second
//              mapping of the same shared memory)
//   release  = close the fd, or unmap the anchor (mappings keep the memory,
//              as cuMemRelease does)
//   stream   = a queue of checked copies, run in order at SyncStream (or
//              DestroyStream): the latest a GPU may run them, so a caller
//              that reads before it waits sees stale bytes here too
//
// The rules are enforced with the record the GPU backends keep (VmmRegistry),
// so host refuses what CUDA refuses, with the same codes and messages.
//
// Devices: options.devices simulated "physical" devices, of which this
// process sees options.visible (all when empty), renumbered from 0 as
// CUDA_VISIBLE_DEVICES renumbers GPUs; a device's uuid follows its physical
// index ("host-1"), so processes under different masks agree on it.
//
// "Device memory" is accounted per simulated device: CreatePage fails with
// kOutOfMemory once the pages created by this backend exceed device_bytes,
// as cuMemCreate does when the GPU is full.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "gpu/backend.h"
#include "gpu/thread_annotations.h"
#include "gpu/vmm_registry.h"

namespace nanokv::gpu {
namespace {

size_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return size_t{1} << 34;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_bytes);
}

size_t AvailableMemoryBytes() {
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_bytes);
}

class HostBackend;

// Every host backend alive in this process. On a GPU every context of a
// process sees the same device memory, so a copy may name memory another
// backend mapped (an engine's client and its object store each have one);
// here that memory is known only to the backend that mapped it.
struct LiveBackends {
  Mutex mu;
  std::vector<HostBackend*> backends NANOKV_GUARDED_BY(mu);
};

LiveBackends& Live() {
  static LiveBackends* live = new LiveBackends();  // never destroyed: backends may outlive main
  return *live;
}

class HostBackend final : public Backend {
 public:
  explicit HostBackend(const HostBackendOptions& options) : options_(options) {
    if (options_.devices < 1) options_.devices = 1;
    if (options_.devices > VmmRegistry::kMaxDevices) options_.devices = VmmRegistry::kMaxDevices;
    if (options_.granularity == 0) options_.granularity = sysconf(_SC_PAGE_SIZE);
    if (options_.device_bytes == 0) options_.device_bytes = PhysicalMemoryBytes();
    // Ordinal -> physical index. A mask entry outside the physical devices
    // or repeated ends the list (CUDA's rule for CUDA_VISIBLE_DEVICES); a
    // mask that leaves nothing is ignored (a backend has >= 1 device).
    for (int physical : options_.visible) {
      if (physical < 0 || physical >= options_.devices ||
          std::find(physical_.begin(), physical_.end(), physical) != physical_.end()) {
        break;
      }
      physical_.push_back(physical);
    }
    if (physical_.empty()) {
      for (int physical = 0; physical < options_.devices; ++physical) physical_.push_back(physical);
    }
    created_bytes_.assign(physical_.size(), 0);
    LiveBackends& live = Live();
    MutexLock lock(live.mu);
    live.backends.push_back(this);
  }

  ~HostBackend() override {
    {
      LiveBackends& live = Live();
      MutexLock lock(live.mu);
      auto& backends = live.backends;
      backends.erase(std::remove(backends.begin(), backends.end(), this), backends.end());
    }
    MutexLock lock(mu_);
    for (auto& [id, page] : pages_) DropPageLocked(page);
    for (auto& [base, range] : registry_.ranges()) munmap(reinterpret_cast<void*>(base), range.size);
  }

  std::string_view name() const override { return "host"; }
  int device_count() const override { return static_cast<int>(physical_.size()); }

  Result<DeviceInfo> GetDeviceInfo(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    DeviceInfo info;
    info.ordinal = device;
    info.name = "host";
    info.granularity = options_.granularity;
    info.total_bytes = options_.device_bytes;
    info.uuid = "host-" + std::to_string(physical_[device]);
    return info;
  }

  Result<size_t> GetFreeMemory(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    MutexLock lock(mu_);
    size_t budget = options_.device_bytes - created_bytes_[device];
    return std::min(budget, AvailableMemoryBytes());
  }

  Result<PageHandle> CreatePage(int device, size_t size) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    NANOKV_RETURN_IF_ERROR(CheckSize("CreatePage", size));
    {
      MutexLock lock(mu_);
      if (created_bytes_[device] + size > options_.device_bytes) {
        return Status(Code::kOutOfMemory,
                      "device " + std::to_string(device) + " has " +
                          std::to_string(options_.device_bytes - created_bytes_[device]) +
                          " bytes left, asked " + std::to_string(size),
                      "CreatePage", "ENOMEM");
      }
      created_bytes_[device] += size;  // held now, so concurrent creates cannot overshoot
    }
    int fd = memfd_create("nanokv-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    Status failure;
    if (fd < 0) {
      failure = Status::FromErrno("memfd_create", errno);
    } else if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      failure = Status::FromErrno("ftruncate", errno, "page of " + std::to_string(size) + " bytes");
    } else if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      failure = Status::FromErrno("fcntl(F_ADD_SEALS)", errno);
    } else if (fchmod(fd, 0600) != 0) {
      // A memfd is 0777: anyone holding a read-only fd of it could re-open
      // /proc/self/fd/N read-write. 0600 leaves that to the creator's uid.
      failure = Status::FromErrno("fchmod", errno, "page mode 0600");
    }
    MutexLock lock(mu_);
    if (!failure.ok()) {
      if (fd >= 0) close(fd);
      created_bytes_[device] -= size;
      return failure;
    }
    uint64_t id = next_id_++;
    pages_[id] = Page{fd, size, device, /*counted=*/true};
    return PageHandle{id};
  }

  Result<int> ExportPage(PageHandle page) override {
    MutexLock lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(Page * p, FindPageLocked(page, "ExportPage"));
    if (!p->counted) {  // as CUDA: an imported handle cannot be exported again
      return Status(Code::kInvalidArgument,
                    "page " + std::to_string(page.value) +
                        " was imported, not created here: it cannot be exported again",
                    "ExportPage", "EINVAL");
    }
    int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("fcntl(F_DUPFD_CLOEXEC)", errno, "ExportPage");
    return fd;
  }

  Result<int> ExportReadOnly(int exported_fd) override {
    // A new open of the same memfd, read-only: a dup would share the
    // writable open file description.
    std::string path = "/proc/self/fd/" + std::to_string(exported_fd);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open", errno, path + " read-only (ExportReadOnly)");
    return fd;
  }

  Result<PageHandle> ImportPage(int fd, int device, size_t size) override {
    Status status = CheckImport(fd, device, size);
    if (!status.ok()) {
      if (fd >= 0) close(fd);
      return status;
    }
    // The anchor keeps the memory as an imported CUDA handle does, without
    // an fd: an engine holds no fd per page it maps.
    void* anchor = mmap(nullptr, size, PROT_NONE, MAP_SHARED, fd, 0);
    const int mmap_errno = errno;
    close(fd);
    if (anchor == MAP_FAILED) return Status::FromErrno("mmap", mmap_errno, "ImportPage");
    MutexLock lock(mu_);
    uint64_t id = next_id_++;
    pages_[id] = Page{-1, size, device, /*counted=*/false, anchor};
    return PageHandle{id};
  }

  Status ReleasePage(PageHandle page) override {
    MutexLock lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(Page * p, FindPageLocked(page, "ReleasePage"));
    DropPageLocked(*p);
    // Device memory is given back when the handle goes, even if a mapping
    // still pins the bytes: the same accounting cuMemGetInfo shows.
    if (p->counted) created_bytes_[p->device] -= p->size;
    pages_.erase(page.value);
    return Status::OK();
  }

  Result<uintptr_t> ReserveRange(size_t size, size_t alignment) override {
    NANOKV_RETURN_IF_ERROR(CheckSize("ReserveRange", size));
    if (alignment == 0) alignment = options_.granularity;
    NANOKV_RETURN_IF_ERROR(CheckReserveAlignment(alignment));
    // As on a GPU: a range is never aligned below the granularity, or its
    // base could not take a page.
    alignment = std::max(alignment, options_.granularity);
    // Over-reserve, then trim both ends to the alignment.
    size_t span = size + alignment;
    void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
      return Status::FromErrno("mmap", errno, "ReserveRange of " + std::to_string(size) + " bytes");
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    uintptr_t base = (start + alignment - 1) & ~(alignment - 1);
    if (base > start) munmap(raw, base - start);
    uintptr_t end = base + size;
    if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
    MutexLock lock(mu_);
    registry_.AddRange(base, {size, options_.granularity});
    return base;
  }

  Status FreeRange(uintptr_t base, size_t size) override {
    MutexLock lock(mu_);
    NANOKV_RETURN_IF_ERROR(registry_.TakeRange(base, size).status());
    munmap(reinterpret_cast<void*>(base), size);
    return Status::OK();
  }

  Status Map(uintptr_t address, size_t size, PageHandle page) override {
    NANOKV_RETURN_IF_ERROR(CheckAligned("Map", address, size));
    MutexLock lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(Page * p, FindPageLocked(page, "Map"));
    NANOKV_RETURN_IF_ERROR(registry_.ClaimMapping({.address = address,
                                                   .size = size,
                                                   .page = page.value,
                                                   .device = p->device,
                                                   .page_bytes = p->size,
                                                   .granularity = options_.granularity}));
    // An imported page has no fd: a second mapping of its anchor, which is
    // PROT_NONE as a fresh mapping is.
    void* got = p->anchor != nullptr
                    ? mremap(p->anchor, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED,
                             reinterpret_cast<void*>(address))
                    : mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
                           MAP_SHARED | MAP_FIXED, p->fd, 0);
    if (got == MAP_FAILED) {
      registry_.DropMapping(address);
      return Status::FromErrno("mmap", errno, "Map at " + Hex(address));
    }
    return Status::OK();
  }

  Status SetAccess(uintptr_t address, size_t size, std::span<const int> devices,
                   Access access = Access::kReadWrite) override {
    NANOKV_RETURN_IF_ERROR(CheckAligned("SetAccess", address, size));
    uint64_t mask = 0;
    for (int device : devices) {
      NANOKV_RETURN_IF_ERROR(CheckDevice(device));
      mask |= uint64_t{1} << device;
    }
    MutexLock lock(mu_);
    // Whole mappings only, as cuMemSetAccess takes (CUDA_ERROR_INVALID_VALUE
    // for part of one): mprotect would take any page-aligned part.
    NANOKV_RETURN_IF_ERROR(registry_.WholeMappings("SetAccess", address, size).status());
    const bool read_only = access == Access::kReadOnly;
    int prot = mask == 0 ? PROT_NONE : read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    if (mprotect(reinterpret_cast<void*>(address), size, prot) != 0) {
      if (errno == EACCES) {  // mapped from an fd opened read-only
        return Status::PermissionDenied("SetAccess at " + Hex(address) +
                                        ": the page came as a read-only export; it can be "
                                        "mapped read-only only");
      }
      return Status::FromErrno("mprotect", errno, "SetAccess at " + Hex(address));
    }
    registry_.SetAccess(address, size, mask, read_only);
    return Status::OK();
  }

  Result<bool> HasAccess(uintptr_t address, int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    MutexLock lock(mu_);
    const VmmRegistry::Mapping* mapping = registry_.FindMapping(address);
    if (mapping == nullptr) {
      return Status::InvalidArgument("HasAccess: " + Hex(address) + " is not mapped");
    }
    return (mapping->access & (uint64_t{1} << device)) != 0;
  }

  Status Unmap(uintptr_t address, size_t size) override {
    NANOKV_RETURN_IF_ERROR(CheckAligned("Unmap", address, size));
    MutexLock lock(mu_);
    NANOKV_ASSIGN_OR_RETURN(auto taken, registry_.TakeMappings("Unmap", address, size));
    // Put a PROT_NONE hole back, so the range stays reserved as on a GPU.
    void* got = mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (got == MAP_FAILED) {
      registry_.RestoreMappings(taken);
      return Status::FromErrno("mmap", errno, "Unmap at " + Hex(address));
    }
    return Status::OK();
  }

  Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    CountDeviceWork();
    if (bytes == 0) return Status::OK();
    if (dst == nullptr || src == nullptr) return Status::InvalidArgument("Copy: null address");
    NANOKV_RETURN_IF_ERROR(CheckCopy("Copy", {dst, src, bytes, kind}));
    std::memmove(dst, src, bytes);
    return Status::OK();
  }

  Status Fill(void* dst, uint8_t value, size_t bytes) override {
    CountDeviceWork();
    if (bytes == 0) return Status::OK();
    if (dst == nullptr) return Status::InvalidArgument("Fill: null address");
    NANOKV_RETURN_IF_ERROR(CheckDeviceMemory("Fill", dst, bytes, /*write=*/true));
    std::memset(dst, value, bytes);
    return Status::OK();
  }

  Result<StreamHandle> CreateStream(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    MutexLock lock(streams_mu_);
    // Numbers never reused: a destroyed stream's handle stays refused.
    const uint64_t id = next_stream_++;
    streams_[id] = std::make_shared<Stream>(device);
    return StreamHandle{id};
  }

  Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, StreamHandle stream) override {
    CountStreamCopy();
    NANOKV_ASSIGN_OR_RETURN(std::shared_ptr<Stream> queue, FindStream("CopyAsync", stream));
    if (bytes == 0) return Status::OK();
    if (dst == nullptr || src == nullptr) return Status::InvalidArgument("CopyAsync: null address");
    const QueuedCopy copy{dst, src, bytes, kind};
    NANOKV_RETURN_IF_ERROR(CheckCopy("CopyAsync", copy, queue->device));
    MutexLock lock(queue->mu);
    queue->copies.push_back(copy);
    return Status::OK();
  }

  Status SyncStream(StreamHandle stream) override {
    NANOKV_ASSIGN_OR_RETURN(std::shared_ptr<Stream> queue, FindStream("SyncStream", stream));
    return RunQueued(*queue);
  }

  Status DestroyStream(StreamHandle stream) override {
    std::shared_ptr<Stream> queue;
    {
      MutexLock lock(streams_mu_);
      auto it = streams_.find(stream.value);
      if (it == streams_.end()) return NoStream("DestroyStream", stream);
      queue = std::move(it->second);
      streams_.erase(it);
    }
    return RunQueued(*queue);  // as cuStreamDestroy: what was queued still runs
  }

 private:
  // A copy whose ends CheckCopy has seen.
  struct QueuedCopy {
    void* dst;
    const void* src;
    size_t bytes;
    CopyKind kind;
  };
  // A stream: copies queued on one device, run in order by RunQueued.
  struct Stream {
    explicit Stream(int on) : device(on) {}
    const int device;
    Mutex mu;  // held while the copies run, so each runs once and in order
    std::vector<QueuedCopy> copies NANOKV_GUARDED_BY(mu);
  };

  static Status NoStream(const char* call, StreamHandle stream) {
    return Status::NotFound(std::string(call) + ": no stream handle " + std::to_string(stream.value) +
                            " (never created here, or destroyed)");
  }

  Result<std::shared_ptr<Stream>> FindStream(const char* call, StreamHandle stream) {
    MutexLock lock(streams_mu_);
    auto it = streams_.find(stream.value);
    if (it == streams_.end()) return NoStream(call, stream);
    return it->second;
  }

  // Runs what `stream` has queued, in order, each copy checked again: its
  // memory may have been unmapped since (a GPU would fault, and the fault
  // ends the context's work; memmove would crash this process). The first
  // failure is returned and the copies after it are dropped, as on a GPU.
  // Lock order: a stream's mu before Live().mu and any backend's mu_.
  Status RunQueued(Stream& stream) {
    MutexLock lock(stream.mu);
    std::vector<QueuedCopy> copies = std::move(stream.copies);
    stream.copies.clear();
    for (const QueuedCopy& copy : copies) {
      NANOKV_RETURN_IF_ERROR(CheckCopy("SyncStream", copy, stream.device));
      std::memmove(copy.dst, copy.src, copy.bytes);
    }
    return Status::OK();
  }

  // The device ends of a copy (CheckDeviceMemory), which `runner` (a
  // stream's device; -1: any device) must have access to.
  Status CheckCopy(const char* call, const QueuedCopy& copy, int runner = -1) {
    if (copy.kind != CopyKind::kDeviceToHost) {
      NANOKV_RETURN_IF_ERROR(CheckDeviceMemory(call, copy.dst, copy.bytes, /*write=*/true, runner));
    }
    if (copy.kind != CopyKind::kHostToDevice) {
      NANOKV_RETURN_IF_ERROR(CheckDeviceMemory(call, copy.src, copy.bytes, /*write=*/false, runner));
    }
    return Status::OK();
  }

  struct Page {
    int fd;  // the memfd of a page created here; -1 for an imported one
    size_t size;
    int device;
    bool counted;  // created here (counts against device memory), not imported
    void* anchor = nullptr;  // an imported page: its PROT_NONE mapping
  };

  static void DropPageLocked(const Page& page) {
    if (page.fd >= 0) close(page.fd);
    if (page.anchor != nullptr) munmap(page.anchor, page.size);
  }

  Status CheckDevice(int device) const {
    if (device < 0 || device >= device_count()) {
      return Status::NotFound("no device " + std::to_string(device) + " (host backend has " +
                              std::to_string(device_count()) + ")");
    }
    return Status::OK();
  }

  Status CheckSize(const char* call, size_t size) const {
    return CheckMultipleOfGranularity(call, size, options_.granularity);
  }

  Status CheckAligned(const char* call, uintptr_t address, size_t size) const {
    return CheckAlignedToGranularity(call, address, size, options_.granularity);
  }

  Status CheckImport(int fd, int device, size_t size) const {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    NANOKV_RETURN_IF_ERROR(CheckSize("ImportPage", size));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return Status::FromErrno("fstat", errno, "ImportPage");
    if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != size) {
      return Status::InvalidArgument("ImportPage: fd is not a page of " + std::to_string(size) +
                                     " bytes (it has " + std::to_string(st.st_size) + ")");
    }
    // Only sealed pages: an unsealed file could be truncated under a mapping.
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
      return Status::InvalidArgument("ImportPage: fd is not a sealed nanokv page");
    }
    return Status::OK();
  }

  Result<Page*> FindPageLocked(PageHandle page, const char* call) NANOKV_REQUIRES(mu_) {
    auto it = pages_.find(page.value);
    if (it == pages_.end()) {
      return Status::NotFound(std::string(call) + ": no page handle " + std::to_string(page.value));
    }
    return &it->second;
  }

  // The device end of a copy must be device memory: inside a reservation of
  // this backend or another of this process, mapped with access. On a GPU a
  // copy anywhere else faults (and the fault is sticky); here it would write
  // wherever the pointer says, so it is refused as the GPU would refuse it.
  // Lock order: Live().mu before any backend's mu_, never the other way.
  Status CheckDeviceMemory(const char* call, const void* pointer, size_t bytes, bool write = false, int runner = -1) {
    {
      MutexLock lock(mu_);
      NANOKV_ASSIGN_OR_RETURN(VmmRegistry::Span span, registry_.CheckSpan(call, pointer, bytes, write, runner));
      if (span.ours) return Status::OK();
    }
    LiveBackends& live = Live();
    MutexLock live_lock(live.mu);
    for (HostBackend* other : live.backends) {
      if (other == this) continue;
      MutexLock lock(other->mu_);
      NANOKV_ASSIGN_OR_RETURN(VmmRegistry::Span span, other->registry_.CheckSpan(call, pointer, bytes, write, runner));
      if (span.ours) return Status::OK();
    }
    return Status::InvalidArgument(
        fmt::format("{}: {}+{} is not device memory (outside every range reserved in this "
                    "process; a GPU would fault)",
                    call, Hex(reinterpret_cast<uintptr_t>(pointer)), bytes));
  }

  HostBackendOptions options_;
  std::vector<int> physical_;  // by ordinal: the simulated device's physical index
  Mutex mu_;
  uint64_t next_id_ NANOKV_GUARDED_BY(mu_) = 1;  // 0 is never a handle
  std::unordered_map<uint64_t, Page> pages_ NANOKV_GUARDED_BY(mu_);
  VmmRegistry registry_ NANOKV_GUARDED_BY(mu_);               // ranges, mappings
  std::vector<size_t> created_bytes_ NANOKV_GUARDED_BY(mu_);  // per device
  Mutex streams_mu_;                                          // a lock of its own: RunQueued's checks take mu_
  uint64_t next_stream_ NANOKV_GUARDED_BY(streams_mu_) = 1;   // 0 is never a handle
  std::unordered_map<uint64_t, std::shared_ptr<Stream>> streams_ NANOKV_GUARDED_BY(streams_mu_);
};

}  // namespace

std::unique_ptr<Backend> MakeHostBackend(const HostBackendOptions& options) {
  return std::make_unique<HostBackend>(options);
}

}  // namespace nanokv::gpu
