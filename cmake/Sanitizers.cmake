# Sanitizer builds (docs/RELIABILITY.md, "Sanitizers"): each in a build directory
# of its own (make test-asan -> build-asan, make test-tsan -> build-tsan).
#   NANOKV_ASAN: AddressSanitizer + UndefinedBehaviorSanitizer (leaks included).
#   NANOKV_TSAN: ThreadSanitizer.
# The flags go on every target of the project (libraries, kvd, engines, tests),
# so the processes the integration tests spawn are sanitized too. UBSan does not
# recover: a finding aborts the process, so it fails the test.
option(NANOKV_ASAN "Build everything with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(NANOKV_TSAN "Build everything with ThreadSanitizer" OFF)

if(NANOKV_ASAN AND NANOKV_TSAN)
  message(FATAL_ERROR "NANOKV_ASAN and NANOKV_TSAN are mutually exclusive (the runtimes "
                      "cannot share a process): configure two build directories")
endif()
if((NANOKV_ASAN OR NANOKV_TSAN) AND NANOKV_FUZZ)
  message(FATAL_ERROR "NANOKV_FUZZ sets its own sanitizers: leave NANOKV_ASAN/NANOKV_TSAN off")
endif()

if(NANOKV_ASAN)
  set(_nanokv_san -fsanitize=address,undefined -fno-sanitize-recover=all)
  message(STATUS "nanokv: ASan + UBSan ON")
elseif(NANOKV_TSAN)
  set(_nanokv_san -fsanitize=thread)
  message(STATUS "nanokv: TSan ON")
endif()
if(_nanokv_san)
  add_compile_options(${_nanokv_san} -fno-omit-frame-pointer)
  add_link_options(${_nanokv_san})
endif()
if(NANOKV_TSAN AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # Boost.Asio's fenced blocks (ops/http_server.cc, tests/util/http_get.cc)
  # use std::atomic_thread_fence, which GCC warns TSan does not model
  # (-Wtsan, an error under NANOKV_WERROR). The headers are Debian's; what
  # TSan may then report through them would be a finding to look at, not a
  # build to stop.
  add_compile_options(-Wno-tsan)
endif()
