// What the CUDA and HIP backends share: every VMM method of backend.h written
// once, over a driver reduced to the neutral operations below (MemCreate,
// MemMap, MemSetAccess, ... in the manner of kvcached's gpu_vmm.hpp).
// cuda_backend.cc and hip_backend.cc implement those operations, one driver
// call each in the right device's context, and nothing else of the VMM API:
// the argument checks, the VmmRegistry record, its lock and the undo when the
// driver refuses live here, so the two GPU backends cannot drift apart.
//
// Each method: check the arguments, record the change in the registry under
// mu_, call the driver with mu_ dropped (a driver call can take milliseconds,
// and other threads' calls must not queue behind it), and take the record
// back if the driver refused. Recording first is what makes a racing Map of
// the same address, or a racing Unmap of the same mapping, fail cleanly here
// instead of reaching the driver.
//
// No driver header here (STYLE: one platform per file).
#ifndef NANOKV_GPU_DRIVER_BACKEND_H_
#define NANOKV_GPU_DRIVER_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "gpu/backend.h"
#include "gpu/vmm_registry.h"
#include "nanokv/status.h"

namespace nanokv::gpu {

// A device uuid's 16 bytes as nvidia-smi prints them:
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (DeviceInfo::uuid).
std::string FormatGpuUuid(const unsigned char (&bytes)[16]);

class DriverBackend : public Backend {
 public:
  Result<PageHandle> CreatePage(int device, size_t size) final;
  Result<int> ExportPage(PageHandle page) final;
  Result<PageHandle> ImportPage(int fd, int device, size_t size) final;
  Status ReleasePage(PageHandle page) final;
  Result<uintptr_t> ReserveRange(size_t size, size_t alignment) final;
  Status FreeRange(uintptr_t base, size_t size) final;
  Status Map(uintptr_t address, size_t size, PageHandle page) final;
  Status SetAccess(uintptr_t address, size_t size, std::span<const int> devices,
                   Access access = Access::kReadWrite) final;
  Result<bool> HasAccess(uintptr_t address, int device) final;
  Status Unmap(uintptr_t address, size_t size) final;
  Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind) final;
  Status Fill(void* dst, uint8_t value, size_t bytes) final;
  Result<StreamHandle> CreateStream(int device) final;
  Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, StreamHandle stream) final;
  Status SyncStream(StreamHandle stream) final;
  Status DestroyStream(StreamHandle stream) final;

 protected:
  // `vendor` names the devices in messages ("CUDA", "HIP"); a literal.
  explicit DriverBackend(const char* vendor) : vendor_(vendor) {}

  // kNotFound for an ordinal outside [0, device_count()).
  Status CheckDevice(int device) const;

  // Unmaps, releases and frees whatever callers left behind, logging what
  // fails (at process exit the driver may already be shut down): never aborts.
  // The derived destructor calls it first, while its driver is still there.
  // REQUIRES: no other thread is inside a method of this backend.
  void ReleaseEverything();

  // --- the driver, one operation each ---
  // Every operation that names a device runs in that device's context and
  // gives the caller's own current device back before returning (libkv runs
  // on engines' threads). Errors are the driver's, as Status (backend.h).

  // Readies `device` for driver calls (CUDA retains its primary context on
  // first use) and returns its granularity.
  // REQUIRES: CheckDevice(device) is OK.
  virtual Result<size_t> ReadyDevice(int device) = 0;
  // The device for work tied to no page (reservations, foreign pointers): the
  // caller's current one, else 0, so an engine on device 3 does not grow a
  // context on device 0.
  virtual int AmbientDevice() const = 0;

  // A new exportable page of `size` bytes; never the null handle.
  virtual Result<uint64_t> MemCreate(int device, size_t size) = 0;
  // A new fd for the page; the caller sets close-on-exec and owns it.
  virtual Result<int> MemExport(int device, uint64_t page) = 0;
  // Imports the page behind `fd` (not taken: the caller closes it). The
  // driver may hand back a handle this process already holds.
  virtual Result<uint64_t> MemImport(int fd, int device, size_t size) = 0;
  virtual Status MemRelease(int device, uint64_t page) = 0;
  virtual Result<uintptr_t> AddressReserve(int device, size_t size, size_t alignment) = 0;
  virtual Status AddressFree(uintptr_t base, size_t size) = 0;
  virtual Status MemMap(int device, uintptr_t address, size_t size, uint64_t page) = 0;
  // For each device whose bit is set in `devices`: read-write access (read
  // only when `read_only`) where its bit is also set in `grant`, none
  // otherwise. Other devices are untouched (the driver only changes the
  // locations it is given).
  virtual Status MemSetAccess(int context_device, uintptr_t address, size_t size,
                              uint64_t devices, uint64_t grant, bool read_only) = 0;
  virtual Result<bool> MemGetAccess(int context_device, uintptr_t address, int device) = 0;
  virtual Status MemUnmap(int device, uintptr_t address, size_t size) = 0;
  // Synchronous: another process sees the bytes once these return.
  virtual Status Memcpy(int device, void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  virtual Status Memset(int device, void* dst, uint8_t value, size_t bytes) = 0;
  // A new stream on `device` that never synchronises with the legacy
  // default stream (Memcpy's and Memset's): the driver's handle, never 0.
  virtual Result<uint64_t> StreamCreate(int device) = 0;
  // Queues a copy on `stream` (StreamCreate's on `device`) and returns.
  virtual Status MemcpyAsync(int device, void* dst, const void* src, size_t bytes, CopyKind kind, uint64_t stream) = 0;
  // Returns once every copy queued on `stream` is done.
  virtual Status StreamSynchronize(int device, uint64_t stream) = 0;
  virtual Status StreamDestroy(int device, uint64_t stream) = 0;

 private:
  struct Stream {
    int device = 0;
    uint64_t native = 0;  // the driver's handle
  };
  Result<PageHandle> ImportFromFd(int fd, int device, size_t size);
  // The device whose context runs a copy or fill (VmmRegistry::CopyDevice).
  Result<int> CopyDevice(const char* call, const void* dst, const void* src, size_t bytes,
                         CopyKind kind);
  // The stream behind `stream`; kNotFound naming `call` when we hold none.
  // REQUIRES: mu_ held.
  Result<Stream> FindStreamLocked(const char* call, StreamHandle stream) const;

  const char* const vendor_;
  std::mutex mu_;
  VmmRegistry registry_;  // pages, ranges, mappings; GUARDED_BY(mu_)
  // Streams by our own number, not the driver's handle: a destroyed
  // stream's handle stays refused even where the driver reuses its address.
  std::unordered_map<uint64_t, Stream> streams_;  // GUARDED_BY(mu_)
  uint64_t next_stream_ = 1;                      // GUARDED_BY(mu_); 0 is never a handle
};

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_DRIVER_BACKEND_H_
