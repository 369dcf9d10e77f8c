// The CUDA backend: backend.h over the driver's virtual memory API (cuMem*).
//
//   page     = cuMemCreate (pinned, on one device, exportable as a POSIX fd)
//   export   = cuMemExportToShareableHandle     import = ...FromShareableHandle
//   reserve  = cuMemAddressReserve              map    = cuMemMap
//   access   = cuMemSetAccess                   unmap  = cuMemUnmap
//   release  = cuMemRelease (mappings keep the memory alive, rule 3)
//
// The driver is never linked: libcuda.so.1 is dlopen'ed and every entry point
// is resolved through cuGetProcAddress at the CUDA 12.0 ABI, so one build runs
// on any driver >= 12.0 and a machine without one gets kUnavailable instead of
// a loader error. <cuda.h> supplies prototypes (decltype) and enums only.
//
// The Backend methods themselves (argument checks, the record of pages,
// ranges and mappings that catches misuse before the driver sees it, undo on
// a driver failure) are DriverBackend's, shared with hip_backend.cc; this file
// supplies its driver operations (MemCreate = cuMemCreate, ...).
//
// Contexts: a device's primary context is retained on the first call that
// needs the device, so an engine that sees eight GPUs and uses one does not
// pay for eight contexts. Each call makes its device's context current and
// puts the caller's back afterwards: libkv runs on engines' threads, whose
// current context (their device) must not change under them.
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "gpu/backend.h"
#include "gpu/driver_backend.h"
#include "gpu/vmm_registry.h"

namespace nanokv::gpu {
namespace {

constexpr int kCudaAbiVersion = 12000;  // entry points as CUDA 12.0 defined them
constexpr int kMaxDevices = VmmRegistry::kMaxDevices;

// Every driver entry point used here. cuda.h #defines some names to their
// current ABI (cuMemcpyHtoD -> cuMemcpyHtoD_v2); the Driver members follow the
// macro, so decltype and the member agree, while #name stays the base name
// that cuGetProcAddress wants.
// (By hand: clang-format staircases a list of X()s.)
// clang-format off
#define NANOKV_CUDA_ENTRY_POINTS(X)                                                      \
  X(cuGetErrorName) X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) \
  X(cuDeviceGetName) X(cuDeviceGetUuid) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)  \
  X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)   \
  X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemGetAllocationGranularity) X(cuMemCreate)    \
  X(cuMemRelease) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)      \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) \
  X(cuMemGetAccess) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8)        \
  X(cuMemHostRegister) X(cuMemHostUnregister) X(cuStreamCreate) X(cuStreamSynchronize)   \
  X(cuStreamDestroy) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)
// clang-format on

struct Driver {
#define NANOKV_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  NANOKV_CUDA_ENTRY_POINTS(NANOKV_CUDA_DECLARE)
#undef NANOKV_CUDA_DECLARE
};

struct LibraryCloser {
  void operator()(void* library) const { dlclose(library); }
};
using Library = std::unique_ptr<void, LibraryCloser>;

Code CodeForCudaResult(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return Code::kOutOfMemory;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE: return Code::kInvalidArgument;
    case CUDA_ERROR_NOT_SUPPORTED: return Code::kUnsupported;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY: return Code::kUnavailable;
    case CUDA_ERROR_NOT_PERMITTED: return Code::kPermissionDenied;
    case CUDA_ERROR_ALREADY_MAPPED: return Code::kFailedPrecondition;
    default: return Code::kInternal;
  }
}

// The one place a CUresult becomes a Status: the call, the driver's error
// name ("CUDA_ERROR_OUT_OF_MEMORY") and what was asked ("device 0, 2097152 bytes").
Status CudaError(const Driver& driver, CUresult result, std::string_view call,
                 std::string_view context) {
  const char* name = nullptr;
  std::string error_name;
  if (driver.cuGetErrorName != nullptr && driver.cuGetErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    error_name = name;
  } else {
    error_name = fmt::format("CUresult {}", static_cast<int>(result));
  }
  return Status(CodeForCudaResult(result), context, call, error_name);
}

// `context` is a callable, so the success path formats nothing.
template <typename ContextFn>
Status CheckCuda(const Driver& driver, CUresult result, const char* call, ContextFn&& context) {
  if (result == CUDA_SUCCESS) return Status::OK();
  return CudaError(driver, result, call, context());
}

// NANOKV_CU(driver, cuMemMap, context, args...): calls the entry point and
// returns its Status, naming the call by its source text.
#define NANOKV_CU(driver, fn, context, ...) \
  CheckCuda((driver), (driver).fn(__VA_ARGS__), #fn, [&] { return std::string(context); })

CUdeviceptr DevicePointer(const void* pointer) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(pointer));
}

CUstream StreamOf(uint64_t stream) { return reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream)); }

template <typename Fn>
Status ResolveEntryPoint(decltype(&::cuGetProcAddress) get_proc, const char* symbol, Fn* slot) {
  void* address = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult result =
      get_proc(symbol, &address, kCudaAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  if (result != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || address == nullptr) {
    return Status::Unavailable(fmt::format(
        "libcuda.so.1 does not provide {} for CUDA 12.0 (driver too old?)", symbol));
  }
  *slot = reinterpret_cast<Fn>(address);
  return Status::OK();
}

Result<Driver> ResolveDriver(void* library) {
  // cuGetProcAddress_v2 (with the symbol-status out-parameter) came with 12.0.
  auto get_proc =
      reinterpret_cast<decltype(&::cuGetProcAddress)>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return Status::Unavailable(
        "libcuda.so.1 has no cuGetProcAddress_v2: the NVIDIA driver predates CUDA 12.0");
  }
  Driver driver;
#define NANOKV_CUDA_RESOLVE(name) \
  NANOKV_RETURN_IF_ERROR(ResolveEntryPoint(get_proc, #name, &driver.name));
  NANOKV_CUDA_ENTRY_POINTS(NANOKV_CUDA_RESOLVE)
#undef NANOKV_CUDA_RESOLVE
  return driver;
}

struct DeviceProbe {
  CUdevice handle = 0;
  std::string name;
  std::string uuid;
  size_t total_bytes = 0;
};

Result<DeviceProbe> ProbeDevice(const Driver& driver, int ordinal) {
  DeviceProbe probe;
  auto where = [&] { return fmt::format("device {}", ordinal); };
  NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver, cuDeviceGet, where(), &probe.handle, ordinal));
  char name[256] = {};
  NANOKV_RETURN_IF_ERROR(
      NANOKV_CU(driver, cuDeviceGetName, where(), name, static_cast<int>(sizeof(name) - 1),
                probe.handle));
  probe.name = name;
  CUuuid uuid = {};
  NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver, cuDeviceGetUuid, where(), &uuid, probe.handle));
  unsigned char bytes[16];
  static_assert(sizeof(uuid.bytes) == sizeof(bytes));
  std::memcpy(bytes, uuid.bytes, sizeof(bytes));
  probe.uuid = FormatGpuUuid(bytes);
  NANOKV_RETURN_IF_ERROR(
      NANOKV_CU(driver, cuDeviceTotalMem, where(), &probe.total_bytes, probe.handle));
  int vmm = 0;
  int posix_fd = 0;
  NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver, cuDeviceGetAttribute, where(), &vmm,
                                   CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                   probe.handle));
  NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver, cuDeviceGetAttribute, where(), &posix_fd,
                                   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                   probe.handle));
  if (vmm == 0) {
    return Status::Unsupported(fmt::format(
        "CUDA device {} ({}) does not support virtual memory management", ordinal, probe.name));
  }
  if (posix_fd == 0) {
    return Status::Unsupported(fmt::format(
        "CUDA device {} ({}) cannot export memory as a POSIX file descriptor", ordinal,
        probe.name));
  }
  return probe;
}

Result<std::vector<DeviceProbe>> ProbeDevices(const Driver& driver) {
  Status init = NANOKV_CU(driver, cuInit, "no usable NVIDIA driver or device", 0);
  if (!init.ok()) {
    // Whatever cuInit says (no device, stub library, driver/kernel mismatch),
    // the backend is simply not there.
    return Status(Code::kUnavailable, init.message(), init.call(), init.error_name());
  }
  int count = 0;
  NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver, cuDeviceGetCount, "counting devices", &count));
  if (count <= 0) return Status::Unavailable("libcuda.so.1 loaded, but no CUDA device is visible");
  if (count > kMaxDevices) {
    spdlog::warn("nanokv: {} CUDA devices visible, using the first {}", count, kMaxDevices);
    count = kMaxDevices;
  }
  std::vector<DeviceProbe> probes;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    NANOKV_ASSIGN_OR_RETURN(DeviceProbe probe, ProbeDevice(driver, ordinal));
    probes.push_back(std::move(probe));
  }
  return probes;
}

// Makes a context current on this thread for the guard's life, then puts back
// the caller's (even none). The driver's current context is itself a cheap
// thread-local, so we read it rather than cache it: a cache of our own would
// go stale whenever engine code on the same thread switches devices.
class ScopedContext {
 public:
  explicit ScopedContext(const Driver& driver) : driver_(driver) {}
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  ~ScopedContext() {
    if (!switched_) return;
    Status status =
        NANOKV_CU(driver_, cuCtxSetCurrent, "restoring the caller's context", previous_);
    if (!status.ok()) spdlog::warn("nanokv: {}", status.ToString());
  }

  // REQUIRES: called at most once per guard.
  Status Enter(CUcontext context) {
    CUcontext current = nullptr;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuCtxGetCurrent, "", &current));
    if (current == context) return Status::OK();
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuCtxSetCurrent, "", context));
    previous_ = current;
    switched_ = true;
    return Status::OK();
  }

 private:
  const Driver& driver_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

class CudaBackend final : public DriverBackend {
 public:
  // `library` stays open while the backend lives; `driver` points into it.
  CudaBackend(Library library, const Driver& driver, std::vector<DeviceProbe> probes)
      : DriverBackend("CUDA"), library_(std::move(library)), driver_(driver) {
    for (DeviceProbe& probe : probes) {
      auto device = std::make_unique<Device>();
      device->handle = probe.handle;
      device->name = std::move(probe.name);
      device->uuid = std::move(probe.uuid);
      device->total_bytes = probe.total_bytes;
      devices_.push_back(std::move(device));
    }
  }

  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }

  Result<DeviceInfo> GetDeviceInfo(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    NANOKV_RETURN_IF_ERROR(EnsureDevice(device));
    const Device& d = *devices_[device];
    DeviceInfo info;
    info.ordinal = device;
    info.name = d.name;
    info.granularity = d.granularity;
    info.total_bytes = d.total_bytes;
    info.uuid = d.uuid;
    return info;
  }

  // Read when the device was probed: no context.
  Result<std::string> GetDeviceUuid(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    return devices_[device]->uuid;
  }

  Result<size_t> GetFreeMemory(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemGetInfo, fmt::format("device {}", device),
                                     &free_bytes, &total_bytes));
    return free_bytes;
  }

 private:
  struct Device {
    CUdevice handle = 0;
    std::string name;
    std::string uuid;  // "GPU-...", as nvidia-smi prints it
    size_t total_bytes = 0;
    std::mutex init_mu;             // serializes EnsureDevice's slow path
    std::atomic<bool> ready{false};  // context and granularity are set
    CUcontext context = nullptr;     // the retained primary context
    size_t granularity = 0;          // CU_MEM_ALLOC_GRANULARITY_MINIMUM for our pages
  };

  // --- DriverBackend's operations ---

  Result<size_t> ReadyDevice(int device) override {
    NANOKV_RETURN_IF_ERROR(EnsureDevice(device));
    return devices_[device]->granularity;
  }

  // The device whose context this thread has current (an engine's), else 0.
  int AmbientDevice() const override {
    CUcontext current = nullptr;
    CUdevice handle = 0;
    if (driver_.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr &&
        driver_.cuCtxGetDevice(&handle) == CUDA_SUCCESS) {
      for (int device = 0; device < device_count(); ++device) {
        if (devices_[device]->handle == handle) return device;
      }
    }
    return 0;
  }

  Result<uint64_t> MemCreate(int device, size_t size) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    CUmemAllocationProp prop = PageProperties(device);
    CUmemGenericAllocationHandle handle = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemCreate,
                                     fmt::format("device {}, {} bytes", device, size), &handle,
                                     size, &prop, 0));
    if (handle == 0) return Status::Internal("cuMemCreate returned the null handle");
    return uint64_t{handle};
  }

  Result<int> MemExport(int device, uint64_t page) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    int fd = -1;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemExportToShareableHandle,
                                     fmt::format("page {:#x}", page), &fd, page,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    return fd;
  }

  Result<uint64_t> MemImport(int fd, int device, size_t size) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    CUmemGenericAllocationHandle handle = 0;
    // For POSIX fds the driver takes the fd's value in the pointer argument.
    Status imported =
        NANOKV_CU(driver_, cuMemImportFromShareableHandle,
                  fmt::format("fd {}, device {}, {} bytes", fd, device, size), &handle,
                  reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (imported.code() == Code::kInternal) {
      // An fd that is no exported page gets CUDA_ERROR_UNKNOWN (seen on an
      // H200, driver 580); like the host backend, call that bad input.
      return Status(Code::kInvalidArgument,
                    fmt::format("fd is not an exported CUDA page: {}", imported.message()),
                    imported.call(), imported.error_name());
    }
    NANOKV_RETURN_IF_ERROR(imported);
    if (handle == 0) return Status::Internal("cuMemImportFromShareableHandle returned 0");
    return uint64_t{handle};
  }

  Status MemRelease(int device, uint64_t page) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    return NANOKV_CU(driver_, cuMemRelease, fmt::format("page {:#x}", page), page);
  }

  Result<uintptr_t> AddressReserve(int device, size_t size, size_t alignment) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    CUdeviceptr base = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemAddressReserve,
                                     fmt::format("{} bytes aligned to {}", size, alignment), &base,
                                     size, alignment, 0, 0));
    return static_cast<uintptr_t>(base);
  }

  Status AddressFree(uintptr_t base, size_t size) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, AmbientDevice()));
    return NANOKV_CU(driver_, cuMemAddressFree, fmt::format("{}+{}", Hex(base), size),
                     static_cast<CUdeviceptr>(base), size);
  }

  Status MemMap(int device, uintptr_t address, size_t size, uint64_t page) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    return NANOKV_CU(driver_, cuMemMap,
                     fmt::format("page {:#x} at {}, {} bytes", page, Hex(address), size),
                     static_cast<CUdeviceptr>(address), size, 0, page, 0);
  }

  Status MemSetAccess(int context_device, uintptr_t address, size_t size, uint64_t devices,
                      uint64_t grant, bool read_only) override {
    std::vector<CUmemAccessDesc> descs;
    for (int device = 0; device < device_count(); ++device) {
      uint64_t bit = uint64_t{1} << device;
      if ((devices & bit) == 0) continue;
      CUmemAccessDesc desc{};
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = devices_[device]->handle;
      desc.flags = (grant & bit) == 0 ? CU_MEM_ACCESS_FLAGS_PROT_NONE
                   : read_only        ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                      : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      descs.push_back(desc);
    }
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, context_device));
    return NANOKV_CU(driver_, cuMemSetAccess,
                     fmt::format("{}+{}, {} devices{}", Hex(address), size, std::popcount(grant),
                                 read_only ? ", read-only" : ""),
                     static_cast<CUdeviceptr>(address), size, descs.data(), descs.size());
  }

  Result<bool> MemGetAccess(int context_device, uintptr_t address, int device) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, context_device));
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = devices_[device]->handle;
    unsigned long long flags = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemGetAccess,
                                     fmt::format("{} for device {}", Hex(address), device), &flags,
                                     &location, static_cast<CUdeviceptr>(address)));
    return flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || flags == CU_MEM_ACCESS_FLAGS_PROT_READ;
  }

  Status MemUnmap(int device, uintptr_t address, size_t size) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    return NANOKV_CU(driver_, cuMemUnmap, fmt::format("{}+{}", Hex(address), size),
                     static_cast<CUdeviceptr>(address), size);
  }

  Status Memcpy(int device, void* dst, const void* src, size_t bytes, CopyKind kind) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    auto what = [&] { return fmt::format("{} bytes {} -> {}", bytes, src, dst); };
    switch (kind) {
      case CopyKind::kHostToDevice:
        NANOKV_RETURN_IF_ERROR(
            NANOKV_CU(driver_, cuMemcpyHtoD, what(), DevicePointer(dst), src, bytes));
        break;
      case CopyKind::kDeviceToHost:
        // Returns once the bytes are in host memory: nothing left to wait for.
        return NANOKV_CU(driver_, cuMemcpyDtoH, what(), dst, DevicePointer(src), bytes);
      case CopyKind::kDeviceToDevice:
        NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemcpyDtoD, what(), DevicePointer(dst),
                                         DevicePointer(src), bytes));
        break;
    }
    // Host-to-device from pageable memory and device-to-device copies may
    // return before the bytes land; another process must see them on return.
    return NANOKV_CU(driver_, cuCtxSynchronize, fmt::format("after a copy to {}", dst));
  }

  Status PinHost(void* host, size_t bytes) override {
    if (devices_.empty()) return Status::FailedPrecondition("pinning host memory: no CUDA device");
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, 0));  // portable: pinned for every context
    return NANOKV_CU(driver_, cuMemHostRegister, fmt::format("{} bytes at {}", bytes, host), host, bytes,
                     CU_MEMHOSTREGISTER_PORTABLE);
  }

  Status PinHostReadOnly(void* host, size_t bytes) override {
    if (devices_.empty()) return Status::FailedPrecondition("pinning host memory: no CUDA device");
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, 0));
    return NANOKV_CU(driver_, cuMemHostRegister, fmt::format("{} read-only bytes at {}", bytes, host), host, bytes,
                     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY);
  }

  void UnpinHost(void* host) override {
    ScopedContext scope(driver_);
    Status unpinned = devices_.empty() ? Status::OK() : Enter(scope, 0);
    if (unpinned.ok()) unpinned = NANOKV_CU(driver_, cuMemHostUnregister, fmt::format("{}", host), host);
    if (!unpinned.ok()) spdlog::warn("nanokv: cuda: unpinning host memory: {}", unpinned.ToString());
  }

  Status Memset(int device, void* dst, uint8_t value, size_t bytes) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    NANOKV_RETURN_IF_ERROR(NANOKV_CU(driver_, cuMemsetD8,
                                     fmt::format("{} bytes at {}", bytes, dst), DevicePointer(dst),
                                     value, bytes));
    // cuMemsetD8 is asynchronous to the host for device memory.
    return NANOKV_CU(driver_, cuCtxSynchronize, fmt::format("after a fill at {}", dst));
  }

  // Streams live in the device's primary context, entered for each call as
  // for Memcpy: the caller's own context stays as it was.
  Result<uint64_t> StreamCreate(int device) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    CUstream stream = nullptr;
    // Non-blocking: it neither waits for the legacy default stream (Memcpy's,
    // and every cuMemcpy of this process's) nor makes it wait.
    NANOKV_RETURN_IF_ERROR(
        NANOKV_CU(driver_, cuStreamCreate, fmt::format("device {}", device), &stream, CU_STREAM_NON_BLOCKING));
    if (stream == nullptr) return Status::Internal("cuStreamCreate returned the null stream");
    return uint64_t{reinterpret_cast<uintptr_t>(stream)};
  }

  Status MemcpyAsync(int device, void* dst, const void* src, size_t bytes, CopyKind kind, uint64_t stream) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    auto what = [&] { return fmt::format("{} bytes {} -> {} on stream {:#x}", bytes, src, dst, stream); };
    // Queued only: the bytes are there once StreamSynchronize returns.
    switch (kind) {
      case CopyKind::kHostToDevice:
        return NANOKV_CU(driver_, cuMemcpyHtoDAsync, what(), DevicePointer(dst), src, bytes, StreamOf(stream));
      case CopyKind::kDeviceToHost:
        return NANOKV_CU(driver_, cuMemcpyDtoHAsync, what(), dst, DevicePointer(src), bytes, StreamOf(stream));
      case CopyKind::kDeviceToDevice:
        return NANOKV_CU(driver_, cuMemcpyDtoDAsync, what(), DevicePointer(dst), DevicePointer(src), bytes,
                         StreamOf(stream));
    }
    return Status::InvalidArgument("CopyAsync: unknown copy kind");
  }

  Status StreamSynchronize(int device, uint64_t stream) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    return NANOKV_CU(driver_, cuStreamSynchronize, fmt::format("stream {:#x}", stream), StreamOf(stream));
  }

  Status StreamDestroy(int device, uint64_t stream) override {
    ScopedContext scope(driver_);
    NANOKV_RETURN_IF_ERROR(Enter(scope, device));
    return NANOKV_CU(driver_, cuStreamDestroy, fmt::format("stream {:#x}", stream), StreamOf(stream));
  }

  // --- contexts ---

  CUmemAllocationProp PageProperties(int device) const {
    CUmemAllocationProp prop{};  // zero: no win32 metadata, no compression
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = devices_[device]->handle;
    return prop;
  }

  // Retains the device's primary context and reads its granularity, once.
  // A failure (e.g. no memory for a context) is not cached: the next call retries.
  // REQUIRES: CheckDevice(device) is OK.
  Status EnsureDevice(int device) {
    Device& d = *devices_[device];
    if (d.ready.load(std::memory_order_acquire)) return Status::OK();
    std::lock_guard<std::mutex> lock(d.init_mu);
    if (d.ready.load(std::memory_order_relaxed)) return Status::OK();
    auto where = [&] { return fmt::format("device {}", device); };
    CUcontext context = nullptr;
    NANOKV_RETURN_IF_ERROR(
        NANOKV_CU(driver_, cuDevicePrimaryCtxRetain, where(), &context, d.handle));
    size_t granularity = 0;
    Status status;
    {
      ScopedContext scope(driver_);
      status = scope.Enter(context);
      CUmemAllocationProp prop = PageProperties(device);
      if (status.ok()) {
        status = NANOKV_CU(driver_, cuMemGetAllocationGranularity, where(), &granularity, &prop,
                           CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      }
      if (status.ok() && granularity == 0) {
        status = Status::Internal(fmt::format("device {} reports a granularity of 0", device));
      }
    }
    if (!status.ok()) {
      Status release = NANOKV_CU(driver_, cuDevicePrimaryCtxRelease, where(), d.handle);
      if (!release.ok()) spdlog::warn("nanokv: {}", release.ToString());
      return status;
    }
    d.context = context;
    d.granularity = granularity;
    d.ready.store(true, std::memory_order_release);
    return Status::OK();
  }

  // REQUIRES: CheckDevice(device) is OK.
  Status Enter(ScopedContext& scope, int device) {
    NANOKV_RETURN_IF_ERROR(EnsureDevice(device));
    return scope.Enter(devices_[device]->context);
  }

  Library library_;  // must outlive every use of driver_
  const Driver driver_;
  std::vector<std::unique_ptr<Device>> devices_;  // fixed after construction
};

// Gives back what callers left behind, then the contexts. At process exit the
// driver may already be shut down (CUDA_ERROR_DEINITIALIZED): log, never abort.
CudaBackend::~CudaBackend() {
  ReleaseEverything();
  for (const auto& device : devices_) {
    if (!device->ready.load(std::memory_order_acquire)) continue;
    Status status = NANOKV_CU(driver_, cuDevicePrimaryCtxRelease, device->name, device->handle);
    if (!status.ok()) spdlog::warn("nanokv: cuda teardown: {}", status.ToString());
  }
  // library_ closes after this body. It was opened RTLD_NODELETE: libcuda
  // keeps threads and exit handlers that must not outlive its code.
}

}  // namespace

Result<std::unique_ptr<Backend>> MakeCudaBackend() {
  dlerror();  // clear any stale error, so the one we report is dlopen's
  Library library(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE));
  if (library == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(fmt::format("cannot load libcuda.so.1 (no NVIDIA driver?): {}",
                                           why != nullptr ? why : "unknown dlopen error"));
  }
  NANOKV_ASSIGN_OR_RETURN(Driver driver, ResolveDriver(library.get()));
  NANOKV_ASSIGN_OR_RETURN(std::vector<DeviceProbe> probes, ProbeDevices(driver));
  std::unique_ptr<Backend> backend =
      std::make_unique<CudaBackend>(std::move(library), driver, std::move(probes));
  return backend;
}

}  // namespace nanokv::gpu
