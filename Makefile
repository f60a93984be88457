# The two commands a newcomer needs: `make run` and `make test`. Both set up the machine first
# (scripts/setup.sh is idempotent and takes about a second when everything is there).
BUILD := build
BATON := $(BUILD)/tools/baton/baton

.PHONY: all setup build run test test-asan clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake --preset default >/dev/null
	@cmake --build --preset default

# Compile the bundled example (a PyTorch MLP exported with torch.onnx.export) and run it.
run: build
	$(BATON) compile examples/mlp.onnx -o $(BUILD)/mlp.baton
	$(BATON) run $(BUILD)/mlp.baton --input input=examples/mlp_input.npy --iterations 100

# The whole suite, then the runtime, format and kernel tests again under ASan+UBSan.
test: build
	ctest --preset default
	$(MAKE) --no-print-directory test-asan

test-asan: setup
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan
	ctest --preset asan

clean:
	rm -rf $(BUILD) build-asan build-debug
