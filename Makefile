# The two commands a newcomer needs: `make run` and `make test`. Both set up the machine first
# (scripts/setup.sh is idempotent and takes about a second when everything is there).
BUILD := build
BATON := $(BUILD)/tools/baton/baton

# `make fuzz`: a campaign of FUZZ_SECONDS, the six targets side by side with FUZZ_JOBS processes
# each (corpora accumulate in build-fuzz/campaign/corpus/).
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 1

.PHONY: all setup build run test test-asan fuzz-build fuzz-smoke fuzz op-table clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake --preset default >/dev/null
	@cmake --build --preset default

# Compile the bundled example (a PyTorch MLP exported with torch.onnx.export) and run it. Builds
# only the CLI and the libraries it links, not the tests and benchmarks (`make build` does).
run: setup
	@cmake --preset default >/dev/null
	@cmake --build --preset default --target baton
	$(BATON) compile examples/mlp.onnx -o $(BUILD)/mlp.baton
	$(BATON) run $(BUILD)/mlp.baton --input input=examples/mlp_input.npy --iterations 100

# The whole suite; the CPU suite again under ASan+UBSan (compiler and CLI end to end included);
# then each fuzz target for a minute (fails on any crash, leak or timeout; FUZZ_REPORT_ONLY=1
# reports them without failing).
test: build
	ctest --preset default
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory fuzz-smoke

# docs/operators.md's support matrix, regenerated from this build's registries (`baton ops`); the
# test op_table_is_current fails while the committed one is stale.
op-table: build
	scripts/op_table.py --baton $(BATON) --write

test-asan: setup
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan
	ctest --preset asan

# libFuzzer targets (clang; docs/robustness.md). The seeds are written with the default build's CLI.
fuzz-build: build
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz

fuzz-smoke: fuzz-build
	FUZZ_SECONDS=60 scripts/fuzz.sh smoke

# Longer campaigns, going on past findings; prints executions and findings per target
# (scripts/fuzz_campaign.sh; docs/robustness.md).
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) scripts/fuzz.sh campaign

clean:
	rm -rf $(BUILD) build-asan build-debug build-fuzz
