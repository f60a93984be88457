#!/usr/bin/env bash
# `cmake --install` gives a usable Baton package (issue 13): installs the build into a fresh prefix,
# checks what is there, builds examples/cpp against the installed tree only (find_package(Baton)),
# and runs it on a program compiled by the installed CLI; its outputs must equal `baton run`'s.
#   install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR PYTHON
set -euo pipefail
SRC=$1 BUILD=$2 WORK=$3 PY=$4
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

rm -rf "$WORK" && mkdir -p "$WORK"
PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log" || fail "cmake --install failed (log: $WORK/install.log)"

for f in include/baton/baton.h include/baton/runtime/program.h include/baton/extension/module.h \
         lib/cmake/Baton/BatonConfig.cmake lib/cmake/Baton/BatonConfigVersion.cmake \
         lib/cmake/Baton/BatonTargets.cmake lib/libbaton_runtime.a lib/libbaton_kernels_cpu.a \
         bin/baton; do
  [ -e "$PREFIX/$f" ] || fail "$f is not installed under $PREFIX"
done
[ ! -e "$PREFIX/include/baton/compiler" ] || fail "the compiler's headers are installed, its library is not"
WITH_CUDA=$(grep -c "^set(Baton_WITH_CUDA \(ON\|TRUE\|1\))" "$PREFIX/lib/cmake/Baton/BatonConfig.cmake" || true)
if [ "$WITH_CUDA" = 1 ]; then
  for f in include/baton/cuda/backend.h include/baton/cuda/stream_guard.h lib/libbaton_cuda.a; do
    [ -e "$PREFIX/$f" ] || fail "$f is not installed (Baton was built with CUDA)"
  done
  [ ! -e "$PREFIX/include/baton/cuda/compiler.h" ] || fail "the CUDA builder's header is installed"
fi

# The example, configured from its own folder with only the installed prefix to find Baton in.
cmake -S "$SRC/examples/cpp" -B "$WORK/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log" >&2; fail "examples/cpp does not configure against the installed Baton"; }
cmake --build "$WORK/example" > "$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log" >&2; fail "examples/cpp does not build against the installed Baton"; }
# Nothing of the source or build tree may be on the example's compile or link lines.
if grep -q -e "$SRC/include" -e "$SRC/src/" -e "$BUILD/src/" -e "$BUILD/schema/" "$WORK/example/compile_commands.json" \
     "$WORK/example/build.ninja"; then
  fail "examples/cpp was built with paths into Baton's source or build tree"
fi
if [ "$WITH_CUDA" = 1 ]; then
  grep -q "RUN_MODEL_WITH_CUDA" "$WORK/example/compile_commands.json" \
    || fail "Baton::cuda is installed but the example did not find it"
fi

# Same program, same input: the installed example and the installed CLI agree.
"$PREFIX/bin/baton" compile "$SRC/examples/mlp.onnx" -o "$WORK/mlp.baton" -q
"$WORK/example/run_model" "$WORK/mlp.baton" "$SRC/examples/mlp_input.npy" > "$WORK/run_model.txt"
"$PREFIX/bin/baton" run "$WORK/mlp.baton" --input input="$SRC/examples/mlp_input.npy" \
  --iterations 1 --output-dir "$WORK/cli" > "$WORK/cli.txt"
EXPECTED=$("$PY" - "$WORK/cli/output_0_output.npy" <<'PYEOF'
import sys
import numpy as np
a = np.load(sys.argv[1])
shape = ", ".join(str(d) for d in a.shape)
print(f"output 0: {a.dtype} [{shape}]" + "".join(f" {v:.6g}" for v in a.reshape(-1)[:4]))
PYEOF
)
GOT=$(cat "$WORK/run_model.txt")
echo "run_model:  $GOT"
echo "baton run:  $EXPECTED"
[ "$GOT" = "$EXPECTED" ] || fail "run_model's outputs differ from baton run's"

# The generate example and `baton generate` give one decoder's greedy tokens.
DECODER="$SRC/tests/e2e/models/decode/gpt2_index_put_full_dynamo.onnx"
"$PREFIX/bin/baton" compile "$DECODER" -o "$WORK/decoder.baton" --state auto \
  --dim batch=1..8 --dim new_tokens=1..64 -q
GOT=$("$WORK/example/generate" "$WORK/decoder.baton" 5,17,42,3 20 | head -1 | sed 's/ *$//')
EXPECTED=$("$PREFIX/bin/baton" generate "$WORK/decoder.baton" --prompt-ids 5,17,42,3 \
  --max-new-tokens 20 -q)
echo "generate:       $GOT"
echo "baton generate: $EXPECTED"
[ -n "$GOT" ] && [ "$GOT" = "$EXPECTED" ] || fail "the generate example's tokens differ from baton generate's"
echo "install_test: ok"
