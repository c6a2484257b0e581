# The two commands a new user needs (see README.md):
#   make demo   install dependencies, build, start a local 3-node cluster
#   make test   install dependencies, build, run every test (also under ASan)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz

.PHONY: all deps build build-asan test test-fast test-asan fuzz demo demo-stop \
	compose compose-stop bench format clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRK_WERROR=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRK_SANITIZE=ON \
		-DRK_WERROR=ON

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Every test in the plain build, then every test again under ASan+UBSan.
test: build build-asan
	./scripts/run-tests.sh $(BUILD) $(ASAN_BUILD)

test-fast: build
	./scripts/run-tests.sh $(BUILD)

test-asan: build-asan
	./scripts/run-tests.sh $(ASAN_BUILD)

# libFuzzer targets built with clang; each runs for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DRK_FUZZ=ON -DRK_SANITIZE=ON -DRK_WERROR=ON \
		-DRK_CLUSTER_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

demo: build
	./scripts/demo.sh start $(BUILD)

demo-stop:
	./scripts/demo.sh stop $(BUILD)

# The same three nodes in containers (deploy/docker-compose.yml).
compose: build
	./scripts/compose.sh up $(BUILD)

compose-stop:
	./scripts/compose.sh down $(BUILD)

bench: build
	./tools/bench/run.sh $(BUILD)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
