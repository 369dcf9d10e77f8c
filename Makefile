# The two commands of the README. Both install what is missing, then build.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps build demo test clean

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

clean:
	rm -rf $(BUILD)
