# rocefab: the two commands a newcomer needs are `make demo` and `make test`.
# Both install missing Debian packages first (idempotently), then configure and
# build with CMake into build/.

BUILD_DIR ?= build
MAKEFLAGS += --no-print-directory
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
ARGS ?=
CTEST_ARGS ?=

.PHONY: all deps configure build test demo demo-build bench fuzz clean format

all: build

deps:
	@bash scripts/install-deps.sh

# Ninja starts a target's compiles before the libraries it links are done,
# where make waits for each one (docs/performance.md, "Building"). A build
# directory configured earlier keeps its own generator.
GENERATOR = $(if $(wildcard $(BUILD_DIR)/CMakeCache.txt),,-G Ninja)

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null

build: configure
	@echo "building into $(BUILD_DIR)/ (log: $(BUILD_DIR)/build.log)"
	@cmake --build $(BUILD_DIR) -j $(JOBS) > $(BUILD_DIR)/build.log 2>&1 || \
	  { grep -E -A8 "error|is not defined|undefined reference" $(BUILD_DIR)/build.log | head -120; \
	    tail -5 $(BUILD_DIR)/build.log; echo "build failed; full log: $(BUILD_DIR)/build.log"; exit 1; }

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The demo builds only what it runs: the five programs and the lab.
DEMO_TARGETS = rocefab rocefab-collectord rocefab-controllerd rocefab-hostd rocefab-switchd rocefab-lab

demo-build: configure
	@echo "building the demo's programs into $(BUILD_DIR)/ (log: $(BUILD_DIR)/build.log)"
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS) > $(BUILD_DIR)/build.log 2>&1 || \
	  { grep -E -A8 "error|is not defined|undefined reference" $(BUILD_DIR)/build.log | head -120; \
	    tail -5 $(BUILD_DIR)/build.log; echo "build failed; full log: $(BUILD_DIR)/build.log"; exit 1; }

demo: demo-build
	@bash scripts/demo.sh $(BUILD_DIR) $(ARGS)

bench: build
	@bash scripts/bench.sh $(BUILD_DIR)

# A libFuzzer campaign over every fuzz target (clang, its own build dir;
# RUNS=10000000 executions each by default). See scripts/fuzz.sh.
fuzz: deps
	@bash scripts/fuzz.sh

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
