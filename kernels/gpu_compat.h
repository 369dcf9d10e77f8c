// One source for CUDA and HIP: the .cu files in kernels/ are written against
// CUDA names; under hipcc (__HIPCC__ / __HIP_PLATFORM_AMD__) this header maps
// the few runtime names they use to HIP's and supplies the device primitives
// that differ (system-scope atomics, streaming loads, warp shuffles).
// Device code only includes this header; host C++ never does.
#ifndef NANOKV_KERNELS_GPU_COMPAT_H_
#define NANOKV_KERNELS_GPU_COMPAT_H_

#include <cstdint>

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define NANOKV_HIP 1
#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaGetLastError hipGetLastError
#define cudaGetErrorName hipGetErrorName
#define cudaStream_t hipStream_t
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaEvent_t hipEvent_t
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventBlockingSync hipEventBlockingSync
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventDestroy hipEventDestroy
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaErrorNoKernelImageForDevice hipErrorNoBinaryForGpu
#define cudaErrorInvalidDeviceFunction hipErrorInvalidDeviceFunction
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaHostRegister hipHostRegister
#define cudaHostRegisterMapped hipHostRegisterMapped
#define cudaHostRegisterPortable hipHostRegisterPortable
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaHostUnregister hipHostUnregister
#else
#include <cuda/atomic>
#include <cuda_runtime.h>
#endif

namespace nanokv::gpu_compat {

// Atomics at system scope on 32- or 64-bit words (T: std::uint32_t, or
// std::uint64_t for an object header's {state, epoch}): another GPU over
// NVLink/PCIe, or the host, may be on the other side. On AMD the __atomic
// builtins default to system scope; on NVIDIA cuda::atomic_ref with
// thread_scope_system emits ld.acquire.sys / st.release.sys /
// atom.cas.release.sys.
template <typename T>
__device__ inline T LoadAcquireSystem(const T* p) {
#if defined(NANOKV_HIP)
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
  cuda::atomic_ref<T, cuda::thread_scope_system> a(*const_cast<T*>(p));
  return a.load(cuda::std::memory_order_acquire);
#endif
}

template <typename T>
__device__ inline void StoreReleaseSystem(T* p, T v) {
#if defined(NANOKV_HIP)
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
  cuda::atomic_ref<T, cuda::thread_scope_system> a(*p);
  a.store(v, cuda::std::memory_order_release);
#endif
}

// A relaxed load at system scope: the newest value any side stored, with
// no ordering (no fence) attached.
template <typename T>
__device__ inline T LoadRelaxedSystem(const T* p) {
#if defined(NANOKV_HIP)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  cuda::atomic_ref<T, cuda::thread_scope_system> a(*const_cast<T*>(p));
  return a.load(cuda::std::memory_order_relaxed);
#endif
}

// A relaxed CAS at system scope; *expected gets the value seen.
template <typename T>
__device__ inline bool CasRelaxedSystem(T* p, T* expected, T desired) {
#if defined(NANOKV_HIP)
  return __hip_atomic_compare_exchange_strong(p, expected, desired, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                              __HIP_MEMORY_SCOPE_SYSTEM);
#else
  cuda::atomic_ref<T, cuda::thread_scope_system> a(*p);
  return a.compare_exchange_strong(*expected, desired, cuda::std::memory_order_relaxed,
                                   cuda::std::memory_order_relaxed);
#endif
}

// A relaxed load among the blocks of one GPU.
template <typename T>
__device__ inline T LoadRelaxedDevice(const T* p) {
#if defined(NANOKV_HIP)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*const_cast<T*>(p));
  return a.load(cuda::std::memory_order_relaxed);
#endif
}

// CAS with release on success (relaxed on failure); *expected gets the value seen.
template <typename T>
__device__ inline bool CasReleaseSystem(T* p, T* expected, T desired) {
#if defined(NANOKV_HIP)
  return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
#else
  cuda::atomic_ref<T, cuda::thread_scope_system> a(*p);
  return a.compare_exchange_strong(*expected, desired, cuda::std::memory_order_release,
                                   cuda::std::memory_order_relaxed);
#endif
}

// Fetch-and-add with acquire and release among the blocks of one GPU: a
// count that orders what came before it and sees what came before the
// others'. Device scope: the count is between blocks of one grid, and a
// system-scope fence and atomic in every block cost a 1 MiB put 5 µs.
template <typename T>
__device__ inline T AddAcqRelDevice(T* p, T v) {
#if defined(NANOKV_HIP)
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
#else
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*p);
  return a.fetch_add(v, cuda::std::memory_order_acq_rel);
#endif
}

// CAS with acquire and release among the blocks of one GPU (relaxed on
// failure); *expected gets the value seen.
template <typename T>
__device__ inline bool CasAcqRelDevice(T* p, T* expected, T desired) {
#if defined(NANOKV_HIP)
  return __hip_atomic_compare_exchange_strong(p, expected, desired, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED,
                                              __HIP_MEMORY_SCOPE_AGENT);
#else
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*p);
  return a.compare_exchange_strong(*expected, desired, cuda::std::memory_order_acq_rel,
                                   cuda::std::memory_order_relaxed);
#endif
}

// A 16-byte load of data read once (the source of a page copy): evict-first
// (ld.global.cs) so it does not push the engine's working set out of L1/L2.
__device__ inline uint4 LoadStreaming(const uint4* p) {
#if defined(NANOKV_HIP)
  return *p;  // ROCm 5.2 has no nontemporal load of a struct vector type
#else
  return __ldcs(p);
#endif
}

// Butterfly exchange inside a group of 32 lanes (a warp on NVIDIA, half a
// wave64 on AMD: xor masks below 32 never cross the halves).
__device__ inline float ShflXor32(float v, int mask) {
#if defined(NANOKV_HIP)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

}  // namespace nanokv::gpu_compat

#endif  // NANOKV_KERNELS_GPU_COMPAT_H_
