# Device code (kernels/): CUDA source compiled by nvcc for one architecture,
# sm_90 (Hopper; CMAKE_CUDA_ARCHITECTURES overrides). On by default where nvcc
# is found, except in sanitizer and fuzz builds: their flags go on every
# target (Sanitizers.cmake) and nvcc does not take them. Without it nothing
# else changes: the rest of nanokv reaches the GPU through the driver API.
#
# NANOKV_HIP_KERNELS: also compile the same .cu files as HIP with hipcc
# (compile only, for gfx90a; the objects are not linked anywhere): proves the
# source stays valid HIP. Debian bookworm's hipcc + rocm-device-libs suffice.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")  # /usr/local/cuda/bin is not on PATH
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND NOT NANOKV_ASAN AND NOT NANOKV_TSAN AND NOT NANOKV_FUZZ)
  set(_nanokv_kernels_default ON)
else()
  set(_nanokv_kernels_default OFF)
endif()
option(NANOKV_CUDA_KERNELS "Build kernels/ (needs nvcc)" ${_nanokv_kernels_default})
if(NANOKV_CUDA_KERNELS)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "nanokv: kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "nanokv: kernels OFF")
endif()

option(NANOKV_HIP_KERNELS "Compile kernels/ as HIP too (hipcc, compile only)" OFF)
if(NANOKV_HIP_KERNELS)
  find_program(NANOKV_HIPCC hipcc REQUIRED)
  message(STATUS "nanokv: HIP compile check of kernels/ ON (${NANOKV_HIPCC})")
endif()
