# Device code (kernels/): CUDA source compiled by nvcc for every GPU family
# with the virtual-memory API that the installed nvcc can target, of sm_80
# (A100), sm_86 (A10, A40), sm_89 (L4, L40), sm_90 (H100, H200), sm_100
# (B200) and sm_120 (RTX PRO 6000), the newest also as PTX so a later GPU
# JIT-compiles it (CMAKE_CUDA_ARCHITECTURES overrides). Where no image fits
# a device anyway, libkv copies with the backend instead (one warning). On by default where nvcc
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
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-code OUTPUT_VARIABLE _nvcc_codes
                    ERROR_QUIET RESULT_VARIABLE _nvcc_listed)
    set(_archs)
    foreach(arch 80 86 89 90 100 120)
      if(_nvcc_listed EQUAL 0 AND _nvcc_codes MATCHES "sm_${arch}([^0-9]|$)")
        list(APPEND _archs ${arch}-real)
      endif()
    endforeach()
    if(NOT _archs)
      set(_archs 90-real)  # an nvcc that does not list its codes
    endif()
    list(POP_BACK _archs _newest)
    string(REPLACE "-real" "" _newest "${_newest}")
    list(APPEND _archs ${_newest})  # SASS and PTX
    set(CMAKE_CUDA_ARCHITECTURES ${_archs})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "nanokv: kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "nanokv: kernels OFF")
endif()

option(NANOKV_HIP_KERNELS "Compile kernels/ as HIP too (hipcc, compile only)" OFF)
if(NANOKV_HIP_KERNELS)
  find_program(NANOKV_HIPCC hipcc REQUIRED)
  message(STATUS "nanokv: HIP compile check of kernels/ ON (${NANOKV_HIPCC})")
endif()
