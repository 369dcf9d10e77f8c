# Every dependency comes from a Debian bookworm package that scripts/install-deps.sh
# installs; nothing is vendored or downloaded at build time.
find_package(Threads REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)  # JSON log lines (ops/logging.cc), tests that parse JSON
find_package(Boost 1.74 REQUIRED)
find_package(Protobuf REQUIRED)
find_package(OpenSSL REQUIRED)  # libcrypto: the master's Hello (HMAC-SHA256, RAND_bytes)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# UCX (libucp, libuct, libucs): the data path between nodes (ipc/ucx/).
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
if(NANOKV_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# CUDA: only the driver API header is needed to build the cuda backend, since
# libcuda.so.1 is loaded at run time. Built whenever the toolkit is found.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cuda.h")
  set(NANOKV_HAVE_CUDA ON)
  message(STATUS "nanokv: cuda backend ON (${CUDAToolkit_INCLUDE_DIRS})")
else()
  set(NANOKV_HAVE_CUDA OFF)
  message(STATUS "nanokv: cuda backend OFF (no CUDA toolkit headers)")
endif()

# HIP: headers only, libamdhip64 is loaded at run time. Debian ships ROCm 5.2's.
find_path(NANOKV_HIP_INCLUDE_DIR hip/hip_runtime_api.h PATHS /opt/rocm/include /usr/include)
if(NANOKV_HIP_INCLUDE_DIR)
  set(NANOKV_HAVE_HIP ON)
  message(STATUS "nanokv: hip backend ON (${NANOKV_HIP_INCLUDE_DIR})")
else()
  set(NANOKV_HAVE_HIP OFF)
  message(STATUS "nanokv: hip backend OFF (no HIP headers)")
endif()
