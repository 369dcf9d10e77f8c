# The two commands of the README. Both install what is missing, then build.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# ccache (Debian's, installed by deps) where present: the builds of one tree
# (and a fresh clone on a machine that built it before) reuse what was
# compiled with the same flags. Paths are taken relative to the tree, so a
# clone in another folder hits the same cache.
CCACHE := $(shell command -v ccache 2>/dev/null)
ifneq ($(CCACHE),)
override CMAKE_FLAGS += -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
               -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
endif

.PHONY: deps build demo test test-asan test-tsan install clean

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# kvd and two example engines on this machine's best backend (cuda where a GPU
# is found, else host): scripts/demo.sh says what it shows.
demo: build
	BUILD=$(BUILD) scripts/demo.sh

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# kvd, kvctl, the libraries and headers engines build against, the Python
# package, configs and systemd units (docs/OPERATIONS.md, "Install"), under
# PREFIX (default /usr/local). DESTDIR=... stages it for a package.
PREFIX ?=
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

# Sanitizers (docs/RELIABILITY.md): a build directory each, benchmarks and
# kernels/ left out (nvcc is slow, the kernels' tests need a GPU, and the plain
# build covers their host-side checks), -O1 with line tables only: reports keep
# file:line, and the builds take less of CI's time.
# ASan+UBSan runs every test; TSan builds and runs only the ones labelled
# `concurrency` in tests/CMakeLists.txt. The options reach the kvd and engine
# processes the integration tests spawn, which are sanitized builds too.
SAN_OPT = -O1 -g1 -DNDEBUG
SAN_CMAKE_FLAGS = $(CMAKE_FLAGS) -DNANOKV_BUILD_BENCH=OFF -DNANOKV_CUDA_KERNELS=OFF \
                  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(SAN_OPT)" \
                  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(SAN_OPT)"
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
           LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp"

test-asan: deps
	cmake -S . -B build-asan $(SAN_CMAKE_FLAGS) -DNANOKV_ASAN=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	cmake -S . -B build-tsan $(SAN_CMAKE_FLAGS) -DNANOKV_TSAN=ON
	cmake --build build-tsan -j $(JOBS) --target concurrency_tests
	cd build-tsan && $(TSAN_ENV) ctest --output-on-failure -j $(JOBS) -L concurrency

clean:
	rm -rf $(BUILD) build-asan build-tsan
