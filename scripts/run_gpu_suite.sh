#!/usr/bin/env bash
# Runs the GPU suite and the benchmarks from a bundle (scripts/make_bundle.sh) on a GPU host.
# Run from the repository root (test models and scripts are read from it):
#   tar -xzf .bundle/baton-bundle.tgz -C /tmp && /tmp/baton-bundle/run_gpu_suite.sh [LOG_DIR]
#       [--no-bench] [--sanitize TOOL[,TOOL...]] [--only NAME[,NAME...]]
# --sanitize runs every test binary under compute-sanitizer with each tool (memcheck, racecheck,
# synccheck, initcheck; "all" for the four), reports the errors each found, and skips the CLI
# checks and benchmarks; tests see BATON_UNDER_SANITIZER=<tool> and skip timing assertions (and the
# allocation counts, which the tool's own in-process library inflates) only. Tests named
# *OutOfMemory* make a CUDA allocation fail on purpose: they run in a second pass with
# --report-api-errors no (memory checking stays on), so that pass reports only real faults.
# --only runs just the named test binaries (e.g. cuda_gpu_test). The summaries are read by
# sanitizer_summary.sh (bench/gpu_checks.py reads its logs with it too). cli_test runs the CLI in
# child processes and is left out of --sanitize (bench/gpu_checks.py sanitizes `baton run` on
# full-size models).
# --parallel runs the long binaries side by side on the one GPU (the host's 16 cores do the
# compiling): cuda_conformance_test in three gtest shards, cuda_dynamic_gpu_test in two (its
# device-contract test left for later), onnx_node_test and cuda_gpu_test at once; then the rest
# one at a time, the timing-sensitive contract tests alone on the GPU. About 400 s on an H200
# against about 1000 s one after the other (measured 2026-12-02). Combines with --only.
# Exit status: non-zero when any test failed or a sanitizer reported an error.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=/tmp/baton-gpu-logs
BENCH=1
SANITIZE=""
ONLY=""
PARALLEL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) BENCH=0 ;;
    --sanitize) SANITIZE=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --parallel) PARALLEL=1 ;;
    -*) echo "run_gpu_suite: unknown option $1" >&2; exit 2 ;;
    *) LOG=$1 ;;
  esac
  shift
done
[ "$SANITIZE" = "all" ] && SANITIZE="memcheck,racecheck,synccheck,initcheck"
if [ ! -f tests/e2e/make_models.py ] || [ ! -f examples/mlp.onnx ]; then
  echo "run_gpu_suite: run me from the Baton repository root (the tests read its models);" \
       "$PWD has no tests/e2e/make_models.py or examples/mlp.onnx" >&2
  exit 2
fi
mkdir -p "$LOG"
PY=$(command -v python3)
SITE=$("$PY" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
NV_LIBS=$(ls -d "$SITE"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$HERE/lib:${NV_LIBS}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export BATON_SOURCE_DIR=$PWD
export BATON_E2E_MODELS_DIR=/tmp/baton-e2e-models
export BATON_CLI=$HERE/bin/baton
export BATON_ONNX_NODE_DIR=$HERE/data/node
export BATON_REPORT_DIR=$LOG
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOG/gpu.txt"
[ -f "$HERE/BUILD_INFO" ] && tee -a "$LOG/gpu.txt" <"$HERE/BUILD_INFO"

# BATON_MODELS_READY=1: the models are there already (several suites run side by side share them).
if [ -z "${BATON_MODELS_READY:-}" ]; then
  "$PY" tests/e2e/make_models.py "$BATON_E2E_MODELS_DIR" > "$LOG/make_models.log" 2>&1 || {
    echo "run_gpu_suite: could not generate the e2e models (see make_models.log)"; }
fi

status=0
selected() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
# A gtest log's result in one line: the passed, skipped and failed counts and the failed tests'
# names (not every skipped test's: a device call returns only the end of its output, and the
# skipped lists of a one-GPU host pushed the rest out of it).
summary_of() {
  { grep -hE "^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?" "$@"
    grep -hE "^\[  FAILED  \] [A-Za-z]" "$@" | sed -E 's/ \([0-9]+ ms\)$//' | sort -u; } |
    tr '\n' ' '
}

if [ -n "$SANITIZE" ]; then
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  SUMMARY="$HERE/sanitizer_summary.sh"
  [ -x "$SUMMARY" ] || SUMMARY="$PWD/scripts/sanitizer_summary.sh"
  for tool in ${SANITIZE//,/ }; do
    export BATON_UNDER_SANITIZER=$tool
    for t in "$HERE"/bin/*_test; do
      name=$(basename "$t")
      selected "$name" || continue
      [ "$name" = cli_test ] && continue
      out="$LOG/$name.$tool.log"
      timeout "${BATON_TEST_TIMEOUT:-600}" "$CS" --tool "$tool" --error-exitcode 99 \
        --print-limit 50 "$t" --gtest_filter='-*OutOfMemory*' > "$out" 2>&1
      rc=$?
      rc_oom=0
      if "$t" --gtest_list_tests --gtest_filter='*OutOfMemory*' | grep -q '^  '; then
        timeout "${BATON_TEST_TIMEOUT:-600}" "$CS" --tool "$tool" --error-exitcode 99 \
          --print-limit 50 --report-api-errors no "$t" --gtest_filter='*OutOfMemory*' \
          > "$out.oom" 2>&1
        rc_oom=$?
      else
        : > "$out.oom"
      fi
      [ $rc -eq 0 ] && rc=$rc_oom
      errors=$("$SUMMARY" "$out" "$out.oom")
      tests=$(summary_of "$out" "$out.oom")
      echo "$tool $name: exit $rc  $errors  $tests"
      [ $rc -eq 0 ] || status=1
    done
  done
  exit $status
fi

# One test binary (or a shard of one: `sfx` names its log) under a time limit; prints its line.
run_one() {  # name suffix limit [gtest args...]
  local name=$1 sfx=$2 lim=$3; shift 3
  local log="$LOG/$name$sfx.log" started=$(date +%s)
  timeout "$lim" "$HERE/bin/$name" --gtest_output="xml:$LOG/$name$sfx.xml" "$@" > "$log" 2>&1
  local rc=$?
  echo "$name$sfx: exit $rc in $(( $(date +%s) - started )) s  $(summary_of "$log")"
  return $rc
}
if [ "$PARALLEL" = 1 ]; then
  pids=()
  if selected cuda_conformance_test; then
    for i in 0 1 2; do
      GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i run_one cuda_conformance_test ".shard$i" \
        "${BATON_TEST_TIMEOUT:-480}" & pids+=($!)
    done
  fi
  if selected cuda_dynamic_gpu_test; then
    for i in 0 1; do
      GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i run_one cuda_dynamic_gpu_test ".shard$i" \
        "${BATON_TEST_TIMEOUT:-480}" --gtest_filter='-*DeviceContract*' & pids+=($!)
    done
  fi
  selected onnx_node_test && { run_one onnx_node_test "" "${BATON_TEST_TIMEOUT:-480}" & pids+=($!); }
  selected cuda_gpu_test && { run_one cuda_gpu_test "" "${BATON_TEST_TIMEOUT:-480}" & pids+=($!); }
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  # Alone on the GPU: the device contract at every shape times how soon calls return.
  if selected cuda_dynamic_gpu_test; then
    run_one cuda_dynamic_gpu_test ".contract" "${BATON_TEST_TIMEOUT:-240}" \
      --gtest_filter='*DeviceContract*' || status=1
  fi
  for t in "$HERE"/bin/*_test; do
    name=$(basename "$t")
    selected "$name" || continue
    case "$name" in
      cuda_conformance_test|cuda_dynamic_gpu_test|onnx_node_test|cuda_gpu_test) continue ;;
    esac
    run_one "$name" "" "${BATON_TEST_TIMEOUT:-240}" || status=1
  done
else
  for t in "$HERE"/bin/*_test; do
    name=$(basename "$t")
    selected "$name" || continue
    # The conformance test compiles every case in four precisions, timing each engine's choices
    # on the GPU: about 7 minutes on an H200, so it gets more than the others; cuda_gpu_test
    # takes about 3.5 minutes alone and more beside another suite.
    limit=${BATON_TEST_TIMEOUT:-240}
    [ "$name" = cuda_conformance_test ] && limit=${BATON_TEST_TIMEOUT:-600}
    [ "$name" = cuda_gpu_test ] && limit=${BATON_TEST_TIMEOUT:-480}
    # The dynamic GPU test times GEMM and cuDNN choices at load for every family and precision
    # (2 to 17 s each): about 270 s on an H200. The node tests run every suite on the CPU, build
    # every GPU case for sm_90 and run them on cuda:0.
    [ "$name" = cuda_dynamic_gpu_test ] && limit=${BATON_TEST_TIMEOUT:-480}
    [ "$name" = onnx_node_test ] && limit=${BATON_TEST_TIMEOUT:-480}
    run_one "$name" "" "$limit" || status=1
  done
fi
# The Python package (tests/python) with PyTorch's CUDA tensors, when the bundle has it.
if selected python_test; then
  if [ -d "$HERE/python/baton" ]; then
    started=$(date +%s)
    PYTHONPATH="$HERE/python" timeout "${BATON_TEST_TIMEOUT:-240}" "$PY" -m pytest -q -rs \
      -p no:cacheprovider tests/python > "$LOG/python_test.log" 2>&1
    rc=$?
    echo "python_test: exit $rc in $(( $(date +%s) - started )) s  $(tail -1 "$LOG/python_test.log")"
    [ $rc -eq 0 ] || status=1
  else
    echo "python_test: skipped: the bundle has no python/baton (scripts/make_bundle.sh says why)"
  fi
fi
[ -n "$ONLY" ] && exit $status

# The CLI on the GPU: device-resident I/O, a caller stream, a green context.
B="$HERE/bin/baton"
{
  "$B" compile examples/mlp.onnx -o /tmp/mlp_dev.baton --device cuda:0 --io device &&
  "$B" run /tmp/mlp_dev.baton --device-io --stream caller -n 50 &&
  "$B" run /tmp/mlp_dev.baton --device-io --sms 16 -n 50 &&
  "$B" run /tmp/mlp_dev.baton --device-io --sms 16 --saturate-rest -n 50 &&
  "$B" run /tmp/mlp_dev.baton -n 20 &&
  "$B" compile examples/mlp.onnx -o /tmp/mlp_strict.baton --device cuda:0 --io device --strict-staging &&
  "$B" run /tmp/mlp_strict.baton --device-io -n 5
} > "$LOG/cli.log" 2>&1
echo "cli: exit $? (cli.log)"

if [ "$BENCH" = 1 ]; then
  "$PY" bench/mlp_bench.py --baton "$HERE/bin/baton" --bench "$HERE/bin/baton_bench" \
    --json "$LOG/mlp_bench.json" 2>&1 | grep --line-buffered -v -i warning | tee "$LOG/mlp_bench.log"
fi
exit $status
