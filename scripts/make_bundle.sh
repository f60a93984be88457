#!/usr/bin/env bash
# Packs what the GPU suite and the benchmarks need on a GPU host that has the NVIDIA driver, the
# CUDA runtime libraries (cuBLASLt, NVRTC) and Python, but no build tools, packages or network:
#   bin/    baton, baton_bench, baton_host_overhead_bench, baton_switch_bench, baton_resolve_bench,
#           run_model, the GPU test binaries and cli_test (stripped)
#   lib/    the shared libraries such a host lacks (OpenBLAS, fmt, protobuf, onnx_proto, ...)
#   data/node  ONNX's backend node tests (Debian's libonnx-testdata), run there on cuda:0 (and
#              its simple, pytorch-converted and pytorch-operator suites, run on the CPU)
#   python/baton  the Python package built for the GPU host's Python (PY_BUILD, default
#              build-py312: `cmake -S . -B build-py312 -DBATON_BUILD_PYTHON=ON
#              -DPython_EXECUTABLE=python3.12 ...` and `cmake --build build-py312 --target _baton`;
#              docs/python.md); without it the Python GPU tests are not in the bundle
#   run_gpu_suite.sh, sanitizer_summary.sh
#   BUILD_INFO  the commit (git describe --dirty) and date the bundle was built at
# With --fuzz, also what a fuzz campaign needs on a many-core host without compilers:
#   fuzz/bin    the six libFuzzer targets of FUZZ_BUILD (default build-fuzz; `make fuzz-build`),
#               debug info stripped (libFuzzer and the sanitizer runtimes are linked in)
#   fuzz/dict, fuzz/seeds, fuzz/regressions, fuzz/BUILD_INFO (the commit)
#   bin/addr2line  symbolizes the sanitizers' reports there (function names)
#   fuzz_campaign.sh OUTDIR SECONDS JOBS [TARGET...]   (docs/robustness.md)
# Output: .bundle/baton-bundle.tgz (gitignored). Usage: scripts/make_bundle.sh [--fuzz] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ=0
BUILD=build
for arg in "$@"; do
  case "$arg" in
    --fuzz) FUZZ=1 ;;
    -*) echo "make_bundle: unknown option $arg (usage: $0 [--fuzz] [BUILD_DIR])" >&2; exit 2 ;;
    *) BUILD=$arg ;;
  esac
done
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_TARGETS=(fuzz_program fuzz_engine_blob fuzz_onnx fuzz_npy fuzz_onnx_cuda fuzz_cli)
STAGE=$(mktemp -d)/baton-bundle
mkdir -p "$STAGE/bin" "$STAGE/lib" .bundle

binaries=(
  "$BUILD/tools/baton/baton"
  "$BUILD/bench/baton_bench"
  "$BUILD/bench/baton_host_overhead_bench"
  "$BUILD/bench/baton_switch_bench"
  "$BUILD/bench/baton_resolve_bench"
  "$BUILD/examples/cpp/run_model"
  "$BUILD/tests/backends/cuda/cuda_gpu_test"
  "$BUILD/tests/backends/cuda/cuda_tuning_test"
  "$BUILD/tests/backends/cuda/cuda_contract_test"
  "$BUILD/tests/backends/cuda/cuda_gpu_no_alloc_test"
  "$BUILD/tests/backends/cuda/cuda_dynamic_gpu_test"
  "$BUILD/tests/backends/cuda/cuda_conformance_test"
  "$BUILD/tests/backends/cuda/cuda_handles_test"
  "$BUILD/tests/backends/cuda/cuda_lifecycle_test"
  "$BUILD/tests/backends/cuda/cuda_state_gpu_test"
  "$BUILD/tests/backends/cuda/cuda_other_gpu_test"
  "$BUILD/tests/e2e/onnx_node_test"
  "$BUILD/tests/e2e/cli_test"
)
for b in "${binaries[@]}"; do
  [ -x "$b" ] || { echo "make_bundle: $b is missing: build with a CUDA toolkit first (make build)" >&2; exit 1; }
  strip -o "$STAGE/bin/$(basename "$b")" "$b"
done
libs_of=("${binaries[@]}")

PY_BUILD=${PY_BUILD:-build-py312}
if compgen -G "$PY_BUILD/python/baton/_baton*.so" > /dev/null; then
  mkdir -p "$STAGE/python/baton"
  cp "$PY_BUILD"/python/baton/*.py "$STAGE/python/baton/"
  for so in "$PY_BUILD"/python/baton/_baton*.so; do
    strip -o "$STAGE/python/baton/$(basename "$so")" "$so"
    libs_of+=("$so")
  done
else
  echo "make_bundle: no Python package in $PY_BUILD/python/baton: the Python GPU tests will not run" >&2
fi

if ((FUZZ)); then
  for t in "${FUZZ_TARGETS[@]}"; do
    [ -x "$FUZZ_BUILD/fuzz/$t" ] || { echo "make_bundle: $FUZZ_BUILD/fuzz/$t is missing: make fuzz-build" >&2; exit 1; }
  done
  # The seeds are written with this bundle's CLI, so they carry its format version.
  BATON=$BUILD/tools/baton/baton FUZZ_BUILD=$FUZZ_BUILD scripts/fuzz.sh seeds
  mkdir -p "$STAGE/fuzz/bin" "$STAGE/fuzz/dict" "$STAGE/fuzz/seeds"
  for t in "${FUZZ_TARGETS[@]}"; do
    # Symbols stay (reports name functions); DWARF goes: the bundle stays small, and a finding
    # is reproduced with the fuzz build of the same commit for file and line.
    strip --strip-debug -o "$STAGE/fuzz/bin/$t" "$FUZZ_BUILD/fuzz/$t"
    libs_of+=("$FUZZ_BUILD/fuzz/$t")
    cp -r "$FUZZ_BUILD/seeds/$t" "$STAGE/fuzz/seeds/$t"
    if [ -d "fuzz/regressions/$t" ]; then
      mkdir -p "$STAGE/fuzz/regressions" && cp -r "fuzz/regressions/$t" "$STAGE/fuzz/regressions/$t"
    fi
  done
  cp fuzz/*.dict "$STAGE/fuzz/dict/"
  cp fuzz/lsan.supp "$STAGE/fuzz/"
  cp scripts/fuzz_campaign.sh "$STAGE/"
  # The sanitizer runtimes symbolize with addr2line when given one (llvm-symbolizer would bring
  # all of LLVM).
  cp -L "$(command -v addr2line)" "$STAGE/bin/addr2line"
  libs_of+=("$(command -v addr2line)")
  printf 'commit %s\ndate %s\n' "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$STAGE/fuzz/BUILD_INFO"
fi

# Every shared library the binaries need, except what the GPU host provides itself: the C and
# C++ runtimes and the NVIDIA driver and CUDA libraries (taken from the host, as they must match
# its driver).
for b in "${libs_of[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcuda.so*|libcudart*|libcublas*|libnvrtc*|libcudnn*|libnvJitLink*) ;;
    *) cp -L "$lib" "$STAGE/lib/" ;;
  esac
done
cp scripts/run_gpu_suite.sh scripts/sanitizer_summary.sh "$STAGE/"
# What the bundle was built from, for the logs of the GPU host (whose copy of the repository may
# name another commit, as it did in issue 12's sixth pass). gpu_bench.py and run_gpu_suite.sh
# read it.
# The script builds nothing: a source newer than the CLI means the binaries may be of an older
# tree than the commit named, which BUILD_INFO then says.
stale=$(find src include tools -type f -newer "$BUILD/tools/baton/baton" 2>/dev/null | head -1)
if [ -n "$stale" ]; then
  echo "make_bundle: $stale is newer than $BUILD/tools/baton/baton: rebuild first (make build)" >&2
fi
printf 'commit %s%s\ndate %s\n' "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
  "${stale:+ (binaries older than $stale)}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$STAGE/BUILD_INFO"
TESTDATA=/usr/share/libonnx-testdata/data
if [ -d "$TESTDATA/node" ]; then
  mkdir -p "$STAGE/data"
  for suite in node simple pytorch-converted pytorch-operator; do
    cp -r "$TESTDATA/$suite" "$STAGE/data/$suite"
  done
else
  echo "make_bundle: $TESTDATA/node is missing (run scripts/setup.sh): the node tests will skip" >&2
fi
tar -C "$(dirname "$STAGE")" -czf .bundle/baton-bundle.tgz baton-bundle
rm -rf "$(dirname "$STAGE")"
echo "make_bundle: .bundle/baton-bundle.tgz ($(du -h .bundle/baton-bundle.tgz | cut -f1))"
