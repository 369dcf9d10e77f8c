// The GPU backend: one interface over the GPU's virtual-memory API, in the shape
// of LevelDB's Env. Every layer above (daemon/node/, daemon/objects/, libkv/client/) talks to a
// Backend& and never to a driver, so the same code runs on CUDA, on HIP and on
// the host backend (memfd pages + mmap) that CI uses.
//
// Glossary (used the same way everywhere in nanokv):
//   page     one physical allocation of page_bytes bytes (a multiple of the
//            device's granularity), created by CreatePage. One handle per page:
//            the driver refuses cuMemMap at a non-zero offset into a handle.
//   range    a reserved virtual address range: address space, no memory.
//   mapping  one page mapped at one address inside a range.
//   access   the devices allowed to read (and, unless read-only, write) a
//            mapping. A new mapping has none: SetAccess must follow every Map.
//
// What every method may assume and promises (like mimalloc's prim.h):
//   - sizes and addresses given to Reserve/Map/SetAccess/Unmap are multiples of
//     the device's granularity; a violation is kInvalidArgument, never a crash;
//   - errors are values: a driver failure carries the call ("cuMemMap") and the
//     driver's error name ("CUDA_ERROR_INVALID_VALUE"); nothing aborts;
//   - all implementations are safe for concurrent use from many threads.
//
// Rules the host backend enforces exactly as CUDA does, so code that passes on
// host behaves the same on a GPU:
//   1. access must be set after every Map (a fresh mapping is inaccessible);
//   2. Unmap and SetAccess cover whole mappings only: a mapping cannot be
//      partly unmapped, nor partly given access (CUDA_ERROR_INVALID_VALUE);
//   3. a page's memory lives while any holder keeps it: its handle (in any
//      process that created or imported it) or a mapping of it. ReleasePage
//      drops only this handle.
#ifndef NANOKV_GPU_BACKEND_H_
#define NANOKV_GPU_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::gpu {

// An opaque page handle. Its value means something only to the backend that
// made it, in the process that made it; 0 is never a valid handle.
struct PageHandle {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
  friend bool operator==(PageHandle, PageHandle) = default;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H200", "host"
  size_t granularity = 0;    // the VMM granularity: page sizes are multiples of it
  size_t total_bytes = 0;    // device memory, for capacity as a fraction
  // A stable identity of the physical device, the same in every process of
  // the node whatever its ordinal there (CUDA_VISIBLE_DEVICES renumbers):
  // "GPU-<8>-<4>-<4>-<4>-<12>" hex as nvidia-smi prints it (cuda, hip),
  // "host-<physical index>" for a simulated device. At most kMaxUuidBytes
  // printable bytes; empty where the driver cannot tell.
  std::string uuid = {};
  static constexpr size_t kMaxUuidBytes = 64;
};

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

// An opaque stream handle (CreateStream), as PageHandle: meaningful only to
// the backend that made it, in the process that made it; 0 is never valid.
struct StreamHandle {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
  friend bool operator==(StreamHandle, StreamHandle) = default;
};

// What SetAccess gives: read-write, or read only (cuda's
// CU_MEM_ACCESS_FLAGS_PROT_READ, hip's hipMemAccessFlagsProtRead, host's
// PROT_READ). A write through a read-only mapping faults: SIGSEGV on host, a
// GPU fault on cuda and hip; the backend's own Copy and Fill refuse it first
// (kPermissionDenied), as they refuse a mapping without access.
enum class Access { kReadWrite, kReadOnly };

class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // "host", "cuda" or "hip".
  virtual std::string_view name() const = 0;
  virtual int device_count() const = 0;

  // kNotFound for an ordinal outside [0, device_count()).
  virtual Result<DeviceInfo> GetDeviceInfo(int device) = 0;
  // The device's uuid (DeviceInfo::uuid) without readying it: no context is
  // created, so a process can match devices without a context on each.
  // kNotFound for an ordinal outside [0, device_count()).
  virtual Result<std::string> GetDeviceUuid(int device) {
    NANOKV_ASSIGN_OR_RETURN(DeviceInfo info, GetDeviceInfo(device));
    return info.uuid;
  }
  // Device memory free right now, in bytes.
  virtual Result<size_t> GetFreeMemory(int device) = 0;

  // Creates an exportable physical page of `size` bytes on `device`.
  // kInvalidArgument if size is 0 or not a multiple of the granularity;
  // kOutOfMemory when the device has no room.
  virtual Result<PageHandle> CreatePage(int device, size_t size) = 0;
  // Returns a new file descriptor (close-on-exec) that another process can
  // import; the caller owns it. kNotFound for a handle this backend does not hold.
  // Only a page created here can be exported: CUDA refuses to export an
  // imported handle (CUDA_ERROR_INVALID_VALUE, kInvalidArgument), so every
  // backend does. A process that must pass an imported page on keeps a
  // duplicate of the fd it imported (libkv's page cache does, for kvd restarts).
  virtual Result<int> ExportPage(PageHandle page) = 0;
  // An fd of the page behind `exported_fd` (an ExportPage fd, not taken) that
  // gives its holder read access only, for readers of what others wrote.
  // The caller owns it. Host: the memfd re-opened O_RDONLY, so a peer
  // cannot map it writable (mmap PROT_WRITE|MAP_SHARED is EACCES), and pages
  // are 0600 so it cannot re-open it writable through /proc either, unless it
  // runs as the page's owner or root. cuda and hip: a duplicate of the fd, as
  // the driver's POSIX-fd export gives whoever holds it full access (read-only
  // access flags then bind only a cooperating importer).
  virtual Result<int> ExportReadOnly(int exported_fd);
  // Imports a page exported by ExportPage, in this or another process.
  // Takes ownership of `fd` whether it succeeds or not. `size` is the page
  // size the exporter announced; kInvalidArgument where the backend can tell
  // that the fd is not a page of that size.
  virtual Result<PageHandle> ImportPage(int fd, int device, size_t size) = 0;
  // Drops this handle. Mappings of the page stay valid until unmapped (rule 3).
  virtual Status ReleasePage(PageHandle page) = 0;

  // Reserves `size` bytes of virtual address space aligned to `alignment`
  // (0: the granularity). Returns the base address.
  virtual Result<uintptr_t> ReserveRange(size_t size, size_t alignment) = 0;
  // Frees a whole reservation. kFailedPrecondition while pages are mapped in it.
  virtual Status FreeRange(uintptr_t base, size_t size) = 0;
  // Maps the whole of `page` (of `size` bytes) at `address`, inside a range and
  // over no other mapping. The mapping has no access until SetAccess (rule 1).
  virtual Status Map(uintptr_t address, size_t size, PageHandle page) = 0;
  // Gives `devices` `access` to [address, address+size), which must be made
  // of whole mappings with no hole (rule 2: kInvalidArgument otherwise).
  // kPermissionDenied for read-write where the page came from a read-only
  // export (ExportReadOnly): the host backend can tell; a GPU driver cannot.
  virtual Status SetAccess(uintptr_t address, size_t size, std::span<const int> devices,
                           Access access = Access::kReadWrite) = 0;
  // Whether `device` may access (read, at least) the mapped byte at `address`.
  virtual Result<bool> HasAccess(uintptr_t address, int device) = 0;
  // Unmaps [address, address+size), which must be made of whole mappings
  // (rule 2: kInvalidArgument otherwise).
  virtual Status Unmap(uintptr_t address, size_t size) = 0;

  // Synchronous copy of `bytes`. Device addresses are mapped addresses with
  // access; host addresses are ordinary process memory.
  virtual Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  // Synchronous fill of device memory with a byte value.
  virtual Status Fill(void* dst, uint8_t value, size_t bytes) = 0;

  // Streams: an ordered queue of copies on one device, for a thread whose
  // copies must neither wait behind the process's other device work nor
  // make it wait (kvd's tier worker beside its transfer agent). Copy and
  // Fill run on the legacy default stream, which every blocking stream of
  // the context waits for and which waits for them; a stream made here is
  // non-blocking (CU_STREAM_NON_BLOCKING, hipStreamNonBlocking), so its
  // copies and theirs overlap. Host: a queue of copies of its own, run at
  // SyncStream, so code that forgets to wait sees stale bytes in CI too.
  //
  // A new stream on `device`. kNotFound for an ordinal outside
  // [0, device_count()).
  virtual Result<StreamHandle> CreateStream(int device) = 0;
  // Queues a copy of `bytes` on `stream`, after the copies queued there
  // before. Checked now as Copy checks (kInvalidArgument, kPermissionDenied
  // into a read-only mapping or one without access), and the stream's device
  // must have access to the device ends (kPermissionDenied: it runs the
  // copy). kNotFound for a stream this backend does not hold. Done only once
  // SyncStream(stream) returns OK: until then both ends must stay live and
  // mapped, and the source unchanged (a GPU may read it late).
  virtual Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, StreamHandle stream) = 0;
  // Waits for every copy queued on `stream`; another process sees their
  // bytes once it returns. A copy's failure after it was queued (a GPU's
  // fault; on host, memory unmapped meanwhile) comes back here. kNotFound
  // for a stream this backend does not hold.
  virtual Status SyncStream(StreamHandle stream) = 0;
  // Ends `stream`: copies still queued complete first (as cuStreamDestroy
  // lets them), and the handle is invalid from then on. kNotFound for a
  // stream this backend does not hold (destroyed already, say).
  virtual Status DestroyStream(StreamHandle stream) = 0;

  // Page-locks `bytes` of host memory at `host` for every device, so copies
  // to and from it run at the bus's speed rather than through the driver's
  // bounce buffers (cuMemHostRegister); UnpinHost before the memory is freed.
  // The host backend has nothing to pin: OK. hip: OK, left pageable.
  virtual Status PinHost(void* /*host*/, size_t /*bytes*/) { return Status::OK(); }
  virtual void UnpinHost(void* /*host*/) {}
  // PinHost of memory mapped read-only here (a reader's mapping of kvd's
  // host tier): the driver must not ask to write it
  // (CU_MEMHOSTREGISTER_READ_ONLY). Undo with UnpinHost.
  virtual Status PinHostReadOnly(void* host, size_t bytes) { return PinHost(host, bytes); }

  // Copy, Fill and CopyAsync calls made so far, counted by every
  // implementation: work on a device, which in kvd costs the engines on that
  // GPU a context switch each way (~150 us on an H100). kvd serves requests
  // without any (issue 15); its /metrics shows the count.
  uint64_t device_work_calls() const { return device_work_calls_.load(std::memory_order_relaxed); }
  // Of those, the CopyAsync calls: the device work that ran on a stream of
  // its caller's rather than the legacy default stream.
  uint64_t stream_copy_calls() const { return stream_copy_calls_.load(std::memory_order_relaxed); }

 protected:
  void CountDeviceWork() { device_work_calls_.fetch_add(1, std::memory_order_relaxed); }
  void CountStreamCopy() {
    CountDeviceWork();
    stream_copy_calls_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> device_work_calls_{0};
  std::atomic<uint64_t> stream_copy_calls_{0};
};

struct HostBackendOptions {
  int devices = 1;                  // simulated devices (the "physical" ones)
  size_t granularity = 2u << 20;    // CUDA's on Hopper, so sizes behave alike
  size_t device_bytes = 0;          // memory per device; 0: physical RAM
  // The simulated devices this process sees, by physical index, in order:
  // ordinal i is physical device visible[i] (uuid "host-<visible[i]>"), as
  // CUDA_VISIBLE_DEVICES renumbers GPUs. Empty: all of them, in order.
  std::vector<int> visible = {};
};

// The host backend is always available.
std::unique_ptr<Backend> MakeHostBackend(const HostBackendOptions& options = {});
// kUnavailable when libcuda.so.1 cannot be loaded or no device exists;
// kUnsupported when a device lacks VMM or POSIX-fd export.
Result<std::unique_ptr<Backend>> MakeCudaBackend();
// kUnavailable when libamdhip64 cannot be loaded or no device exists;
// kUnsupported ("ROCm >= 6.2 required") on an older runtime.
Result<std::unique_ptr<Backend>> MakeHipBackend();

// Host options from the environment: NANOKV_HOST_DEVICES simulates several
// devices, NANOKV_HOST_DEVICE_MEMORY (a size, "8GiB") sets memory per device,
// NANOKV_HOST_VISIBLE_DEVICES ("1", "1,0") masks them as CUDA_VISIBLE_DEVICES
// does GPUs (HostBackendOptions::visible; as CUDA, an entry that is not a
// device ends the list).
HostBackendOptions HostOptionsFromEnvironment();

// This process's ordinal of the device whose uuid is `uuid`; kNotFound when
// no device this process sees has it.
Result<int> FindDeviceByUuid(Backend& backend, std::string_view uuid);

// This process's ordinal of kvd's device `kvd_device`, which kvd names by
// `uuid`: the device with that uuid, or, where kvd sent none (the ordinals
// agree), the same ordinal. kNotFound "kvd's device N (uuid) is not visible
// to this process ..." when there is none (CUDA_VISIBLE_DEVICES, a mask).
Result<int> LocalOrdinal(Backend& backend, int kvd_device, std::string_view uuid);

// Opens a backend by name: "host", "cuda", "hip", or "auto" (cuda when a
// VMM-capable device is found, else hip likewise, else host with
// `host_options`). An empty name means the environment's NANOKV_BACKEND,
// else "auto".
Result<std::unique_ptr<Backend>> OpenBackend(std::string_view name,
                                             const HostBackendOptions& host_options);
inline Result<std::unique_ptr<Backend>> OpenBackend(std::string_view name = {}) {
  return OpenBackend(name, HostOptionsFromEnvironment());
}

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_BACKEND_H_
