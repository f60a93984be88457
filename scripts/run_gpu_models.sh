#!/usr/bin/env bash
# Full-size models on a GPU host from a bundle (scripts/make_bundle.sh): correctness against PyTorch
# (bench/gpu_models.py) and the benchmark against PyTorch eager and torch.compile (bench/gpu_bench.py).
# Nothing is built there; the scripts are read from this repository. From the repository root:
#
#   tar -xzf .bundle/baton-bundle.tgz -C /tmp
#   scripts/run_gpu_models.sh /tmp/baton-bundle LOG_DIR [--models-only | --bench-only |
#       --checks-only | --green-only | --sanitize-only] [--commit SHA] [--work DIR]
#       [--models-args "ARGS"] [--bench-args "ARGS"] [--checks-args "ARGS"]
#
# --models-only: just bench/gpu_models.py (48 cases: 6 families x 2 exporters x batch 1, 8 x fp32,
#   fp16; about 4-6 minutes on an H100 with 16 CPUs). --bench-only: just bench/gpu_bench.py without
#   max-autotune (8 cases; about 5-7 minutes on a cold torch.compile cache). Both together take
#   longer than one 10-minute device command: run them as two calls on the same warm machine (the
#   bench then reuses the exports under --work). max-autotune for some models in a call of its
#   own, merged as it goes into the first call's table (LOG/bench/gpu_bench.{json,md}); a CNN's
#   max-autotune compile alone takes 150-340 s on an H100, so one CNN per call:
#     scripts/run_gpu_models.sh /tmp/baton-bundle LOG2 --bench-only --bench-args "--modes \
#         max-autotune --models resnet50 --compile-timeout 380 \
#         --merge-into LOG/bench/gpu_bench.json"
#   or merge two tables afterwards:
#     python3 bench/gpu_bench.py --merge LOG/bench/gpu_bench.json LOG2/bench/gpu_bench.json --out LOG3
# --checks-only: just bench/gpu_checks.py on full-size ResNet-50 and BERT-base (fp16, batch 1):
#   the green context of half the SMs alone and with the other SMs saturated (--saturate-rest),
#   then compute-sanitizer memcheck and racecheck on `baton run` (device and host I/O).
#   --green-only / --sanitize-only: only the first / only the sanitizer part (--checks-args
#   "--checks memcheck" narrows it further; one tool per call keeps a call under 10 minutes).
#   Reuses the exports of an earlier call under --work.
# --models-args / --bench-args / --checks-args pass more options (e.g. "--only resnet,bert";
#   gpu_models.py: "--precisions bf16 --batches 1" for bf16, "--export-dtypes fp16 --batches 1"
#   for models exported in fp16; gpu_checks.py: "--checks racecheck --io device").
# Writes LOG_DIR/models/{gpu_models.json,gpu_models.md,logs/}, LOG_DIR/bench/{gpu_bench.json,
# gpu_bench.md,logs/}, LOG_DIR/checks/{gpu_checks.json,gpu_checks.md,logs/},
# LOG_DIR/{models,bench,checks}.log. Large files stay under --work (/tmp/baton_gpu).
# The logs are written line by line as the scripts run (grep --line-buffered), so a call cut off by
# the device's time limit still leaves what it had done in LOG_DIR/*.log.
# Exit status: non-zero when a correctness case did not pass or a runner failed.
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,36p' "$0" >&2
  exit 2
fi
BUNDLE=$(cd "$1" && pwd)
LOG=$2
shift 2
MODELS=1
BENCH=1
CHECKS=0
CHECK_SET=green,memcheck,racecheck
COMMIT=COMMIT
WORK=/tmp/baton_gpu
MODELS_ARGS=""
BENCH_ARGS="--no-max-autotune"
CHECKS_ARGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --models-only) BENCH=0 ;;
    --bench-only) MODELS=0 ;;
    --checks-only) MODELS=0; BENCH=0; CHECKS=1 ;;
    --green-only) MODELS=0; BENCH=0; CHECKS=1; CHECK_SET=green ;;
    --sanitize-only) MODELS=0; BENCH=0; CHECKS=1; CHECK_SET=memcheck,racecheck ;;
    --checks-args) CHECKS_ARGS=$2; shift ;;
    --commit) COMMIT=$2; shift ;;
    --work) WORK=$2; shift ;;
    --models-args) MODELS_ARGS=$2; shift ;;
    --bench-args) BENCH_ARGS=$2; shift ;;
    *) echo "run_gpu_models: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -f bench/gpu_models.py ] || [ ! -f tests/e2e/export_real_models.py ]; then
  echo "run_gpu_models: run me from the Baton repository root" >&2
  exit 2
fi
# The ARGS strings split as the shell would (quotes group: --checks-args "--sanitizer-args '--a b'").
eval "MODELS_EXTRA=($MODELS_ARGS)"
eval "BENCH_EXTRA=($BENCH_ARGS)"
eval "CHECKS_EXTRA=($CHECKS_ARGS)"
mkdir -p "$LOG"
PY=$(command -v python3)
SITE=$("$PY" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
NV_LIBS=$(ls -d "$SITE"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$BUNDLE/lib:${NV_LIBS}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOG/gpu.txt"
"$BUNDLE/bin/baton" --version || { echo "run_gpu_models: $BUNDLE/bin/baton does not start" >&2; exit 2; }

status=0
if [ "$MODELS" = 1 ]; then
  "$PY" -u bench/gpu_models.py --baton "$BUNDLE/bin/baton" --out "$LOG/models" --work "$WORK/models" \
    --commit "$COMMIT" "${MODELS_EXTRA[@]}" 2>&1 | grep --line-buffered -v -i "warning" | tee "$LOG/models.log"
  rc=${PIPESTATUS[0]}
  echo "gpu_models: exit $rc"
  [ "$rc" = 0 ] || status=1
fi
if [ "$BENCH" = 1 ]; then
  REUSE=()
  [ -d "$WORK/models/onnx" ] && REUSE=(--models-from "$WORK/models/onnx")
  "$PY" -u bench/gpu_bench.py --baton "$BUNDLE/bin/baton" --out "$LOG/bench" --work "$WORK/bench" \
    --commit "$COMMIT" "${REUSE[@]}" "${BENCH_EXTRA[@]}" 2>&1 | grep --line-buffered -v -i "warning" | tee "$LOG/bench.log"
  rc=${PIPESTATUS[0]}
  echo "gpu_bench: exit $rc"
  [ "$rc" = 0 ] || status=1
fi
if [ "$CHECKS" = 1 ]; then
  REUSE=()
  if [ -d "$WORK/models/onnx" ]; then REUSE=(--models-from "$WORK/models/onnx")
  elif [ -d "$WORK/bench/onnx" ]; then REUSE=(--models-from "$WORK/bench/onnx"); fi
  # --checks in --checks-args comes later on the command line and wins.
  "$PY" -u bench/gpu_checks.py --baton "$BUNDLE/bin/baton" --out "$LOG/checks" --work "$WORK/checks" \
    --commit "$COMMIT" --checks "$CHECK_SET" "${REUSE[@]}" "${CHECKS_EXTRA[@]}" 2>&1 | grep --line-buffered -v -i "warning" |
    tee "$LOG/checks.log"
  rc=${PIPESTATUS[0]}
  echo "gpu_checks: exit $rc"
  [ "$rc" = 0 ] || status=1
fi
exit $status
