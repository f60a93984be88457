#!/usr/bin/env bash
# Packs what the GPU suite and the benchmarks need on a GPU host that has the NVIDIA driver, the
# CUDA runtime libraries (cuBLASLt, NVRTC) and Python, but no build tools, packages or network:
#   bin/    baton, baton_bench, run_model and the GPU test binaries (stripped)
#   lib/    the shared libraries such a host lacks (OpenBLAS, fmt, protobuf, onnx_proto, ...)
#   data/node  ONNX's backend node tests (Debian's libonnx-testdata), run there on cuda:0
#   run_gpu_suite.sh
# Output: .bundle/baton-bundle.tgz (gitignored). Usage: scripts/make_bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STAGE=$(mktemp -d)/baton-bundle
mkdir -p "$STAGE/bin" "$STAGE/lib" .bundle

binaries=(
  "$BUILD/tools/baton/baton"
  "$BUILD/bench/baton_bench"
  "$BUILD/examples/run_model"
  "$BUILD/tests/backends/cuda/cuda_gpu_test"
  "$BUILD/tests/backends/cuda/cuda_contract_test"
  "$BUILD/tests/backends/cuda/cuda_gpu_no_alloc_test"
  "$BUILD/tests/backends/cuda/cuda_conformance_test"
  "$BUILD/tests/backends/cuda/cuda_handles_test"
  "$BUILD/tests/backends/cuda/cuda_lifecycle_test"
  "$BUILD/tests/e2e/onnx_node_test"
)
for b in "${binaries[@]}"; do
  [ -x "$b" ] || { echo "make_bundle: $b is missing: build with a CUDA toolkit first (make build)" >&2; exit 1; }
  strip -o "$STAGE/bin/$(basename "$b")" "$b"
done

# Every shared library the binaries need, except what the GPU host provides itself: the C and
# C++ runtimes and the NVIDIA driver and CUDA libraries (taken from the host, as they must match
# its driver).
for b in "${binaries[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcuda.so*|libcudart*|libcublas*|libnvrtc*|libcudnn*|libnvJitLink*) ;;
    *) cp -L "$lib" "$STAGE/lib/" ;;
  esac
done
cp scripts/run_gpu_suite.sh "$STAGE/"
NODE_DIR=/usr/share/libonnx-testdata/data/node
if [ -d "$NODE_DIR" ]; then
  mkdir -p "$STAGE/data" && cp -r "$NODE_DIR" "$STAGE/data/node"
else
  echo "make_bundle: $NODE_DIR is missing (run scripts/setup.sh): the node tests will skip" >&2
fi
tar -C "$(dirname "$STAGE")" -czf .bundle/baton-bundle.tgz baton-bundle
rm -rf "$(dirname "$STAGE")"
echo "make_bundle: .bundle/baton-bundle.tgz ($(du -h .bundle/baton-bundle.tgz | cut -f1))"
