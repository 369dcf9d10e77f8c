// The HIP backend: backend.h over ROCm's virtual memory API (hipMem*), the
// same design as cuda_backend.cc (read that file's header first):
//
//   page     = hipMemCreate (pinned, on one device, exportable as a POSIX fd)
//   export   = hipMemExportToShareableHandle     import = ...FromShareableHandle
//   reserve  = hipMemAddressReserve              map    = hipMemMap
//   access   = hipMemSetAccess                   unmap  = hipMemUnmap
//   release  = hipMemRelease
//
// libamdhip64 is dlopen'ed, never linked. It is built against whatever HIP
// headers the build machine has (Debian ships ROCm 5.2's) but requires a
// runtime >= 6.2, the first whose VMM fd export works; older runtimes get
// kUnsupported. Where the headers and that runtime disagree, this file follows
// the runtime and says so:
//   - hipMemAllocationProp: ROCm 5.2's headers lay it out differently from
//     ROCm >= 6 (which copies CUDA's CUmemAllocationProp), so the struct is
//     declared here in the runtime's layout (AllocationProp below);
//   - hipMemImportFromShareableHandle takes a pointer to the fd before ROCm
//     7.1 and the fd's value from 7.1 on, chosen by the version read at start;
//   - hipDeviceAttributeVirtualMemoryManagementSupported is missing from old
//     headers (kVmmSupportedAttribute below).
//
// HIP has no contexts to retain: a call makes its device current with
// hipSetDevice and puts the caller's device back afterwards. As in
// cuda_backend.cc, the Backend methods are DriverBackend's; this file supplies
// its driver operations (MemCreate = hipMemCreate, ...).
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include <bit>
#include <cstring>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "gpu/backend.h"
#include "gpu/driver_backend.h"
#include "gpu/vmm_registry.h"

namespace nanokv::gpu {
namespace {

constexpr int kMinRuntimeVersion = 60200000;     // ROCm 6.2, in HIP_VERSION's encoding
constexpr int kImportTakesFdValue = 70100000;    // ROCm 7.1: osHandle is the fd, not &fd
constexpr int kMaxDevices = VmmRegistry::kMaxDevices;

// The runtime's hipMemAllocationProp (ROCm >= 6, the same layout as CUDA's
// CUmemAllocationProp). ROCm 5.2's header has {compressionType, location,
// requestedHandleType, type, usage, win32HandleMetaData} instead, which a
// 6.2 runtime would misread; field names also differ between 6.x
// (requestedHandleType) and 7.x (requestedHandleTypes), so we name our own.
struct AllocationProp {
  hipMemAllocationType type;
  hipMemAllocationHandleType requested_handle_types;
  hipMemLocation location;
  void* win32_handle_metadata;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
  } alloc_flags;
};
#if HIP_VERSION >= 60200000
static_assert(sizeof(AllocationProp) == sizeof(hipMemAllocationProp),
              "hipMemAllocationProp changed layout: update AllocationProp");
#endif

#if HIP_VERSION >= 60000000
constexpr hipDeviceAttribute_t kVmmSupportedAttribute =
    hipDeviceAttributeVirtualMemoryManagementSupported;
#else
// Missing from these (pre-6.0) headers. 89 is its value in the ROCm 6 and 7
// headers, whose enum keeps retired slots ("Unused") so the numbers stay put.
constexpr auto kVmmSupportedAttribute = static_cast<hipDeviceAttribute_t>(89);
#endif

// Entry points whose header prototype matches the runtime we require.
// (By hand: clang-format staircases a list of X()s.)
// clang-format off
#define NANOKV_HIP_ENTRY_POINTS(X)                                                        \
  X(hipGetErrorName) X(hipInit) X(hipGetDeviceCount) X(hipGetDevice) X(hipSetDevice)      \
  X(hipDeviceGetAttribute) X(hipDeviceGetName) X(hipDeviceGetUuid) X(hipDeviceTotalMem)   \
  X(hipDeviceSynchronize)                                                                 \
  X(hipMemGetInfo) X(hipMemRelease) X(hipMemExportToShareableHandle)                      \
  X(hipMemImportFromShareableHandle) X(hipMemAddressReserve) X(hipMemAddressFree)         \
  X(hipMemMap) X(hipMemUnmap) X(hipMemSetAccess) X(hipMemGetAccess) X(hipMemcpyHtoD)      \
  X(hipMemcpyDtoH) X(hipMemcpyDtoD) X(hipMemsetD8) X(hipStreamCreateWithFlags)            \
  X(hipStreamSynchronize) X(hipStreamDestroy) X(hipMemcpyHtoDAsync) X(hipMemcpyDtoHAsync) \
  X(hipMemcpyDtoDAsync)
// clang-format on

struct Runtime {
#define NANOKV_HIP_DECLARE(name) decltype(&::name) name = nullptr;
  NANOKV_HIP_ENTRY_POINTS(NANOKV_HIP_DECLARE)
#undef NANOKV_HIP_DECLARE
  // Declared with AllocationProp, not the header's struct (see above).
  hipError_t (*hipMemCreate)(hipMemGenericAllocationHandle_t*, size_t, const AllocationProp*,
                             unsigned long long) = nullptr;
  hipError_t (*hipMemGetAllocationGranularity)(size_t*, const AllocationProp*,
                                               hipMemAllocationGranularity_flags) = nullptr;
  int version = 0;  // HIP_VERSION encoding: major * 10000000 + minor * 100000 + patch
};

struct LibraryCloser {
  void operator()(void* library) const { dlclose(library); }
};
using Library = std::unique_ptr<void, LibraryCloser>;

std::string VersionText(int version) {
  return fmt::format("{}.{}.{}", version / 10000000, version / 100000 % 100, version % 100000);
}

Code CodeForHipError(hipError_t error) {
  switch (error) {
    case hipErrorOutOfMemory: return Code::kOutOfMemory;
    case hipErrorInvalidValue:
    case hipErrorInvalidHandle:
    case hipErrorInvalidDevice:
    case hipErrorInvalidDevicePointer: return Code::kInvalidArgument;
    case hipErrorNotSupported: return Code::kUnsupported;
    case hipErrorNoDevice:
    case hipErrorNotInitialized:
    case hipErrorDeinitialized:
    case hipErrorInsufficientDriver: return Code::kUnavailable;
    case hipErrorAlreadyMapped: return Code::kFailedPrecondition;
    default: return Code::kInternal;
  }
}

// The one place a hipError_t becomes a Status: the call, the runtime's error
// name ("hipErrorOutOfMemory") and what was asked.
Status HipError(const Runtime& runtime, hipError_t error, std::string_view call,
                std::string_view context) {
  const char* name = runtime.hipGetErrorName != nullptr ? runtime.hipGetErrorName(error) : nullptr;
  std::string error_name =
      name != nullptr ? std::string(name) : fmt::format("hipError_t {}", static_cast<int>(error));
  return Status(CodeForHipError(error), context, call, error_name);
}

// `context` is a callable, so the success path formats nothing.
template <typename ContextFn>
Status CheckHip(const Runtime& runtime, hipError_t error, const char* call, ContextFn&& context) {
  if (error == hipSuccess) return Status::OK();
  return HipError(runtime, error, call, context());
}

// NANOKV_HIP(runtime, hipMemMap, context, args...): calls the entry point and
// returns its Status, naming the call by its source text.
#define NANOKV_HIP(runtime, fn, context, ...) \
  CheckHip((runtime), (runtime).fn(__VA_ARGS__), #fn, [&] { return std::string(context); })

void* AddressPointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

hipMemGenericAllocationHandle_t HandleOf(uint64_t page) {
  return reinterpret_cast<hipMemGenericAllocationHandle_t>(static_cast<uintptr_t>(page));
}

hipStream_t StreamOf(uint64_t stream) { return reinterpret_cast<hipStream_t>(static_cast<uintptr_t>(stream)); }

template <typename Fn>
Status ResolveSymbol(void* library, const char* symbol, Fn* slot) {
  void* address = dlsym(library, symbol);
  if (address == nullptr) {
    return Status::Unavailable(fmt::format("libamdhip64 does not provide {}", symbol));
  }
  *slot = reinterpret_cast<Fn>(address);
  return Status::OK();
}

Result<Library> OpenLibrary() {
  std::string failures;
  for (const char* name : {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                           "libamdhip64.so.5"}) {
    dlerror();
    // RTLD_NODELETE: the runtime keeps threads and exit handlers that must
    // not outlive its code, whatever our dlclose says.
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
      return Library(library);
    }
    const char* why = dlerror();
    if (failures.empty()) failures = why != nullptr ? why : name;
  }
  return Status::Unavailable(
      fmt::format("cannot load libamdhip64 (no ROCm runtime?): {}", failures));
}

// The runtime's version, asked before anything else so that an old runtime is
// told apart from a broken one.
Result<int> ReadRuntimeVersion(void* library) {
  for (const char* symbol : {"hipRuntimeGetVersion", "hipDriverGetVersion"}) {
    auto get = reinterpret_cast<hipError_t (*)(int*)>(dlsym(library, symbol));
    int version = 0;
    if (get != nullptr && get(&version) == hipSuccess && version > 0) return version;
  }
  return Status::Unavailable("libamdhip64 loaded, but cannot tell its version");
}

Result<Runtime> ResolveRuntime(void* library) {
  NANOKV_ASSIGN_OR_RETURN(int version, ReadRuntimeVersion(library));
  if (version < kMinRuntimeVersion) {
    return Status::Unsupported(fmt::format("ROCm >= 6.2 required for VMM fd export (found {})",
                                           VersionText(version)));
  }
  Runtime runtime;
  runtime.version = version;
#define NANOKV_HIP_RESOLVE(name) \
  NANOKV_RETURN_IF_ERROR(ResolveSymbol(library, #name, &runtime.name));
  NANOKV_HIP_ENTRY_POINTS(NANOKV_HIP_RESOLVE)
  NANOKV_HIP_RESOLVE(hipMemCreate)
  NANOKV_HIP_RESOLVE(hipMemGetAllocationGranularity)
#undef NANOKV_HIP_RESOLVE
  return runtime;
}

AllocationProp PageProperties(int device) {
  AllocationProp prop{};  // zero: no win32 metadata, no compression
  prop.type = hipMemAllocationTypePinned;
  prop.requested_handle_types = hipMemHandleTypePosixFileDescriptor;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

// Makes a device current on this thread for the guard's life, then puts back
// the caller's: libkv runs on engines' threads, whose device must not change.
class ScopedDevice {
 public:
  explicit ScopedDevice(const Runtime& runtime) : runtime_(runtime) {}
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (!switched_) return;
    Status status =
        NANOKV_HIP(runtime_, hipSetDevice, "restoring the caller's device", previous_);
    if (!status.ok()) spdlog::warn("nanokv: {}", status.ToString());
  }

  // REQUIRES: called at most once per guard.
  Status Enter(int device) {
    int current = -1;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipGetDevice, "", &current));
    if (current == device) return Status::OK();
    NANOKV_RETURN_IF_ERROR(
        NANOKV_HIP(runtime_, hipSetDevice, fmt::format("device {}", device), device));
    previous_ = current;
    switched_ = current >= 0;
    return Status::OK();
  }

 private:
  const Runtime& runtime_;
  int previous_ = -1;
  bool switched_ = false;
};

struct DeviceProbe {
  std::string name;
  std::string uuid;
  size_t total_bytes = 0;
  size_t granularity = 0;
};

Result<DeviceProbe> ProbeDevice(const Runtime& runtime, int device) {
  DeviceProbe probe;
  auto where = [&] { return fmt::format("device {}", device); };
  int vmm = 0;
  Status attribute =
      NANOKV_HIP(runtime, hipDeviceGetAttribute, where(), &vmm, kVmmSupportedAttribute, device);
  if (!attribute.ok()) {
    // The attribute's number comes from newer headers than ours (see above);
    // if this runtime does not know it, hipMemCreate will speak instead.
    spdlog::debug("nanokv: cannot ask device {} for VMM support: {}", device,
                  attribute.ToString());
  } else if (vmm == 0) {
    return Status::Unsupported(
        fmt::format("HIP device {} does not support virtual memory management", device));
  }
  char name[256] = {};
  NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime, hipDeviceGetName, where(), name,
                                    static_cast<int>(sizeof(name) - 1), device));
  probe.name = name;
  hipUUID uuid = {};
  NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime, hipDeviceGetUuid, where(), &uuid, device));
  unsigned char bytes[16];
  static_assert(sizeof(uuid.bytes) == sizeof(bytes));
  std::memcpy(bytes, uuid.bytes, sizeof(bytes));
  probe.uuid = FormatGpuUuid(bytes);
  NANOKV_RETURN_IF_ERROR(
      NANOKV_HIP(runtime, hipDeviceTotalMem, where(), &probe.total_bytes, device));
  ScopedDevice scope(runtime);
  NANOKV_RETURN_IF_ERROR(scope.Enter(device));
  AllocationProp prop = PageProperties(device);
  NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime, hipMemGetAllocationGranularity, where(),
                                    &probe.granularity, &prop,
                                    hipMemAllocationGranularityMinimum));
  if (probe.granularity == 0) {
    return Status::Internal(fmt::format("device {} reports a granularity of 0", device));
  }
  return probe;
}

Result<std::vector<DeviceProbe>> ProbeDevices(const Runtime& runtime) {
  Status init = NANOKV_HIP(runtime, hipInit, "no usable AMD GPU", 0);
  if (!init.ok()) {
    return Status(Code::kUnavailable, init.message(), init.call(), init.error_name());
  }
  int count = 0;
  Status counted = NANOKV_HIP(runtime, hipGetDeviceCount, "counting devices", &count);
  if (!counted.ok() || count <= 0) {
    return Status(Code::kUnavailable, "libamdhip64 loaded, but no AMD GPU is visible",
                  counted.call(), counted.error_name());
  }
  if (count > kMaxDevices) {
    spdlog::warn("nanokv: {} HIP devices visible, using the first {}", count, kMaxDevices);
    count = kMaxDevices;
  }
  std::vector<DeviceProbe> probes;
  for (int device = 0; device < count; ++device) {
    NANOKV_ASSIGN_OR_RETURN(DeviceProbe probe, ProbeDevice(runtime, device));
    probes.push_back(std::move(probe));
  }
  return probes;
}

class HipBackend final : public DriverBackend {
 public:
  // `library` stays open while the backend lives; `runtime` points into it.
  HipBackend(Library library, const Runtime& runtime, std::vector<DeviceProbe> devices)
      : DriverBackend("HIP"),
        library_(std::move(library)),
        runtime_(runtime),
        devices_(std::move(devices)) {}

  // Gives back what callers left behind. At process exit the runtime may
  // already be shut down: log, never abort.
  ~HipBackend() override { ReleaseEverything(); }

  std::string_view name() const override { return "hip"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }

  Result<DeviceInfo> GetDeviceInfo(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    DeviceInfo info;
    info.ordinal = device;
    info.name = devices_[device].name;
    info.granularity = devices_[device].granularity;
    info.total_bytes = devices_[device].total_bytes;
    info.uuid = devices_[device].uuid;
    return info;
  }

  Result<size_t> GetFreeMemory(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemGetInfo, fmt::format("device {}", device),
                                      &free_bytes, &total_bytes));
    return free_bytes;
  }

 private:
  // --- DriverBackend's operations ---

  // Nothing to ready: the granularity was read when the device was probed.
  Result<size_t> ReadyDevice(int device) override { return devices_[device].granularity; }

  int AmbientDevice() const override {
    int device = 0;
    if (runtime_.hipGetDevice(&device) != hipSuccess || device < 0 || device >= device_count()) {
      return 0;
    }
    return device;
  }

  Result<uint64_t> MemCreate(int device, size_t size) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    AllocationProp prop = PageProperties(device);
    hipMemGenericAllocationHandle_t handle = nullptr;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemCreate,
                                      fmt::format("device {}, {} bytes", device, size), &handle,
                                      size, &prop, 0));
    if (handle == nullptr) return Status::Internal("hipMemCreate returned the null handle");
    return uint64_t{reinterpret_cast<uintptr_t>(handle)};
  }

  Result<int> MemExport(int device, uint64_t page) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    // The runtime stores an int here; a zeroed 64-bit slot reads the same
    // should a version ever store a wider handle.
    uint64_t shareable = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemExportToShareableHandle,
                                      fmt::format("page {:#x}", page), &shareable, HandleOf(page),
                                      hipMemHandleTypePosixFileDescriptor, 0));
    int fd = static_cast<int>(shareable);
    if (fd < 0) {
      return Status::Internal(fmt::format("hipMemExportToShareableHandle gave fd {}", fd));
    }
    return fd;
  }

  Result<uint64_t> MemImport(int fd, int device, size_t size) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    int fd_value = fd;
    void* os_handle = runtime_.version >= kImportTakesFdValue
                          ? reinterpret_cast<void*>(static_cast<uintptr_t>(fd))
                          : static_cast<void*>(&fd_value);
    hipMemGenericAllocationHandle_t handle = nullptr;
    NANOKV_RETURN_IF_ERROR(
        NANOKV_HIP(runtime_, hipMemImportFromShareableHandle,
                   fmt::format("fd {}, device {}, {} bytes", fd, device, size), &handle, os_handle,
                   hipMemHandleTypePosixFileDescriptor));
    if (handle == nullptr) return Status::Internal("hipMemImportFromShareableHandle returned null");
    return uint64_t{reinterpret_cast<uintptr_t>(handle)};
  }

  Status MemRelease(int device, uint64_t page) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    return NANOKV_HIP(runtime_, hipMemRelease, fmt::format("page {:#x}", page), HandleOf(page));
  }

  // Address space is the process's, not a device's: no device to enter.
  Result<uintptr_t> AddressReserve(int /*device*/, size_t size, size_t alignment) override {
    void* base = nullptr;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemAddressReserve,
                                      fmt::format("{} bytes aligned to {}", size, alignment),
                                      &base, size, alignment, nullptr, 0));
    return reinterpret_cast<uintptr_t>(base);
  }

  Status AddressFree(uintptr_t base, size_t size) override {
    return NANOKV_HIP(runtime_, hipMemAddressFree, fmt::format("{}+{}", Hex(base), size),
                      AddressPointer(base), size);
  }

  Status MemMap(int device, uintptr_t address, size_t size, uint64_t page) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    return NANOKV_HIP(runtime_, hipMemMap,
                      fmt::format("page {:#x} at {}, {} bytes", page, Hex(address), size),
                      AddressPointer(address), size, 0, HandleOf(page), 0);
  }

  Status MemSetAccess(int context_device, uintptr_t address, size_t size, uint64_t devices,
                      uint64_t grant, bool read_only) override {
    std::vector<hipMemAccessDesc> descs;
    for (int device = 0; device < device_count(); ++device) {
      uint64_t bit = uint64_t{1} << device;
      if ((devices & bit) == 0) continue;
      hipMemAccessDesc desc{};
      desc.location.type = hipMemLocationTypeDevice;
      desc.location.id = device;
      desc.flags = (grant & bit) == 0 ? hipMemAccessFlagsProtNone
                   : read_only        ? hipMemAccessFlagsProtRead
                                      : hipMemAccessFlagsProtReadWrite;
      descs.push_back(desc);
    }
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(context_device));
    return NANOKV_HIP(runtime_, hipMemSetAccess,
                      fmt::format("{}+{}, {} devices{}", Hex(address), size, std::popcount(grant),
                                  read_only ? ", read-only" : ""),
                      AddressPointer(address), size, descs.data(), descs.size());
  }

  Result<bool> MemGetAccess(int context_device, uintptr_t address, int device) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(context_device));
    hipMemLocation location{};
    location.type = hipMemLocationTypeDevice;
    location.id = device;
    unsigned long long flags = 0;
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemGetAccess,
                                      fmt::format("{} for device {}", Hex(address), device),
                                      &flags, &location, AddressPointer(address)));
    return flags == hipMemAccessFlagsProtReadWrite || flags == hipMemAccessFlagsProtRead;
  }

  Status MemUnmap(int device, uintptr_t address, size_t size) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    return NANOKV_HIP(runtime_, hipMemUnmap, fmt::format("{}+{}", Hex(address), size),
                      AddressPointer(address), size);
  }

  Status Memcpy(int device, void* dst, const void* src, size_t bytes, CopyKind kind) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    auto what = [&] { return fmt::format("{} bytes {} -> {}", bytes, src, dst); };
    // hipMemcpyHtoD takes a non-const source it only reads.
    void* source = const_cast<void*>(src);
    switch (kind) {
      case CopyKind::kHostToDevice:
        NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemcpyHtoD, what(), dst, source, bytes));
        break;
      case CopyKind::kDeviceToHost:
        NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemcpyDtoH, what(), dst, source, bytes));
        break;
      case CopyKind::kDeviceToDevice:
        NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemcpyDtoD, what(), dst, source, bytes));
        break;
    }
    // Another process must see the bytes once we return.
    return NANOKV_HIP(runtime_, hipDeviceSynchronize, fmt::format("after a copy to {}", dst));
  }

  Status Memset(int device, void* dst, uint8_t value, size_t bytes) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipMemsetD8,
                                      fmt::format("{} bytes at {}", bytes, dst), dst, value,
                                      bytes));
    // hipMemsetD8 may run asynchronously to the host.
    return NANOKV_HIP(runtime_, hipDeviceSynchronize, fmt::format("after a fill at {}", dst));
  }

  // A stream belongs to the device current when it was made; each call
  // enters that device as Memcpy does and puts the caller's back.
  Result<uint64_t> StreamCreate(int device) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    hipStream_t stream = nullptr;
    // Non-blocking: it neither waits for the null stream (Memcpy's) nor
    // makes it wait.
    NANOKV_RETURN_IF_ERROR(NANOKV_HIP(runtime_, hipStreamCreateWithFlags, fmt::format("device {}", device), &stream,
                                      hipStreamNonBlocking));
    if (stream == nullptr) return Status::Internal("hipStreamCreateWithFlags returned the null stream");
    return uint64_t{reinterpret_cast<uintptr_t>(stream)};
  }

  Status MemcpyAsync(int device, void* dst, const void* src, size_t bytes, CopyKind kind, uint64_t stream) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    auto what = [&] { return fmt::format("{} bytes {} -> {} on stream {:#x}", bytes, src, dst, stream); };
    // hipMemcpyHtoDAsync takes a non-const source it only reads.
    void* source = const_cast<void*>(src);
    // Queued only: the bytes are there once StreamSynchronize returns.
    switch (kind) {
      case CopyKind::kHostToDevice:
        return NANOKV_HIP(runtime_, hipMemcpyHtoDAsync, what(), dst, source, bytes, StreamOf(stream));
      case CopyKind::kDeviceToHost:
        return NANOKV_HIP(runtime_, hipMemcpyDtoHAsync, what(), dst, source, bytes, StreamOf(stream));
      case CopyKind::kDeviceToDevice:
        return NANOKV_HIP(runtime_, hipMemcpyDtoDAsync, what(), dst, source, bytes, StreamOf(stream));
    }
    return Status::InvalidArgument("CopyAsync: unknown copy kind");
  }

  Status StreamSynchronize(int device, uint64_t stream) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    return NANOKV_HIP(runtime_, hipStreamSynchronize, fmt::format("stream {:#x}", stream), StreamOf(stream));
  }

  Status StreamDestroy(int device, uint64_t stream) override {
    ScopedDevice scope(runtime_);
    NANOKV_RETURN_IF_ERROR(scope.Enter(device));
    return NANOKV_HIP(runtime_, hipStreamDestroy, fmt::format("stream {:#x}", stream), StreamOf(stream));
  }

  Library library_;  // must outlive every use of runtime_
  const Runtime runtime_;
  const std::vector<DeviceProbe> devices_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeHipBackend() {
  NANOKV_ASSIGN_OR_RETURN(Library library, OpenLibrary());
  NANOKV_ASSIGN_OR_RETURN(Runtime runtime, ResolveRuntime(library.get()));
  NANOKV_ASSIGN_OR_RETURN(std::vector<DeviceProbe> devices, ProbeDevices(runtime));
  std::unique_ptr<Backend> backend =
      std::make_unique<HipBackend>(std::move(library), runtime, std::move(devices));
  return backend;
}

}  // namespace nanokv::gpu
