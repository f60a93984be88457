#!/usr/bin/env bash
# Runs Baton's libFuzzer targets (fuzz/, built by the `fuzz` CMake preset). docs/robustness.md
# describes the targets, the seeds and how to reproduce a finding.
#
#   scripts/fuzz.sh smoke [TARGET...]     each target FUZZ_SECONDS (default 60) from its seeds and
#                                         regression inputs, in a fresh corpus; fails on the first
#                                         crash, leak, timeout or out-of-memory (`make test`)
#   scripts/fuzz.sh campaign [TARGET...]  all targets side by side for FUZZ_SECONDS (default 600),
#                                         FUZZ_JOBS processes each, on their kept corpora
#                                         (build-fuzz/campaign/corpus, so campaigns accumulate), going
#                                         on past findings (scripts/fuzz_campaign.sh: results in
#                                         build-fuzz/campaign/results-DATE); appends the figures to
#                                         build-fuzz/campaigns.tsv and prints the totals (`make fuzz`)
#   scripts/fuzz.sh seeds                 only (re)writes the seeds (scripts/make_bundle.sh --fuzz)
#
# Environment: FUZZ_SECONDS, FUZZ_JOBS (campaign: fuzzing processes per target, default 1),
# FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_RSS_MB (default 2048),
# FUZZ_REPORT_ONLY=1 (report findings but exit 0), BATON (the CLI that writes the seeds, default
# build/tools/baton/baton), FUZZ_BUILD (default build-fuzz).
set -uo pipefail

cd "$(dirname "$0")/.."
MODE=${1:-}
shift || true
case "$MODE" in
  smoke) SECONDS_PER_TARGET=${FUZZ_SECONDS:-60} ;;
  campaign) SECONDS_PER_TARGET=${FUZZ_SECONDS:-600} ;;
  seeds) ;;
  *) echo "usage: $0 smoke|campaign|seeds [TARGET...]" >&2; exit 2 ;;
esac
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(fuzz_program fuzz_engine_blob fuzz_onnx fuzz_npy fuzz_onnx_cuda fuzz_cli)
BUILD_DIR=${FUZZ_BUILD:-build-fuzz}
BATON=${BATON:-build/tools/baton/baton}
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}
JOBS=${FUZZ_JOBS:-1}
SEEDS=$BUILD_DIR/seeds

# OpenBLAS would start a thread per core in every fuzzing process.
export OPENBLAS_NUM_THREADS=1
# Leaks are findings; UBSan stops at the first report (the build has -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# What the CUDA driver keeps for itself is not a Baton leak (fuzz/lsan.supp says why).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp}
if command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}
fi

# Seeds follow the build: written again when the CLI or the generator is newer than them.
if [ ! -f "$SEEDS/.complete" ] || [ "$BATON" -nt "$SEEDS/.complete" ] ||
   [ fuzz/make_seeds.py -nt "$SEEDS/.complete" ]; then
  [ -x "$BATON" ] || { echo "fuzz: $BATON is missing: run 'make build' first" >&2; exit 2; }
  start=$(date +%s)
  PY=python3  # numpy and onnx: the project's virtual environment (scripts/setup.sh) when it has one
  [ -x .venv/bin/python3 ] && PY=.venv/bin/python3
  "$PY" fuzz/make_seeds.py --baton "$BATON" --out "$SEEDS" || exit 2
  touch "$SEEDS/.complete"
  echo "fuzz: seeds written in $(($(date +%s) - start)) s" >&2
fi
[ "$MODE" = seeds ] && exit 0

if [ "$MODE" = campaign ]; then
  for target in "${TARGETS[@]}"; do
    [ -x "$BUILD_DIR/fuzz/$target" ] || { echo "fuzz: $BUILD_DIR/fuzz/$target is missing: run 'make fuzz-build'" >&2; exit 2; }
  done
  results=$BUILD_DIR/campaign/results-$(date -u +%Y%m%dT%H%M%SZ)
  FUZZ_BIN_DIR=$BUILD_DIR/fuzz FUZZ_DICT_DIR=fuzz FUZZ_SEED_DIR=$SEEDS FUZZ_REGRESSION_DIR=fuzz/regressions \
    FUZZ_LSAN_SUPPRESSIONS=$PWD/fuzz/lsan.supp FUZZ_WORK=$BUILD_DIR/campaign FUZZ_PACK_CORPUS=0 FUZZ_TIMEOUT=$TIMEOUT FUZZ_RSS_MB=$RSS_MB \
    scripts/fuzz_campaign.sh "$results" "$SECONDS_PER_TARGET" "$JOBS" "${TARGETS[@]}" || exit 2
  # date, commit, target, seconds, processes, executions, distinct findings, crash/leak/timeout/oom
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  tail -n +2 "$results/summary.tsv" | awk -F'\t' -v c="$commit" \
    '{printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s/%s/%s\n", $16, c, $1, $2, $3, $5, $11, $7, $8, $9, $10}' \
    >>"$BUILD_DIR/campaigns.tsv"
  echo "fuzz: totals over every campaign in $BUILD_DIR/campaigns.tsv:" >&2
  awk -F'\t' 'NF >= 8 {s[$3] += $4; e[$3] += $6}
              END {for (t in e) printf "  %-17s %12d executions %8d s\n", t, e[t], s[t]}' \
    "$BUILD_DIR/campaigns.tsv" | sort >&2
  echo "fuzz: findings of this campaign: $results/findings.tsv, reports.txt, crashes.tgz" >&2
  exit 0
fi

# Smoke: each target in turn from a fresh corpus, stopping at the first finding.
mkdir -p "$BUILD_DIR/logs"
failed=()
for target in "${TARGETS[@]}"; do
  bin=$BUILD_DIR/fuzz/$target
  [ -x "$bin" ] || { echo "fuzz: $bin is missing: run 'make fuzz-build'" >&2; exit 2; }
  artifacts=$BUILD_DIR/artifacts/$target
  mkdir -p "$artifacts"
  # Absolute: fuzz_cli runs each input in a folder of its own, where a crash is written.
  artifacts=$(cd "$artifacts" && pwd)
  log=$BUILD_DIR/logs/$target.smoke.log
  inputs=()
  [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
  inputs+=("$SEEDS/$target")
  before=$(find "$artifacts" -type f | wc -l)
  corpus=$BUILD_DIR/smoke/$target
  rm -rf "$corpus" && mkdir -p "$corpus"
  # fuzz_onnx_cuda reads the same ONNX as fuzz_onnx: one dictionary.
  name=${target#fuzz_}
  dict=fuzz/${name%_cuda}.dict
  "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
    -malloc_limit_mb="$RSS_MB" -dict="$dict" -artifact_prefix="$artifacts/" \
    -print_final_stats=1 -print_funcs=0 "$corpus" "${inputs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(($(find "$artifacts" -type f | wc -l) - before))
  line="$target: ${execs:-0} executions (${rate:-0}/s), $found new finding(s)"
  if [ $rc -ne 0 ]; then
    artifact=$(grep -oE "Test unit written to [^ ]+" "$log" | awk '{print $NF}' | tail -1)
    kind=$(grep -oE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer|UndefinedBehaviorSanitizer)[^(]*|runtime error: .*|baton fuzz: .*" "$log" | head -1)
    line="$line: FAILED (exit $rc) ${kind:-see the log}; reproducer: ${artifact:-none written}; log: $log"
    failed+=("$target")
  fi
  echo "fuzz: $line" >&2
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (reproduce: $BUILD_DIR/fuzz/TARGET REPRODUCER)" >&2
  [ "${FUZZ_REPORT_ONLY:-0}" = 1 ] && { echo "fuzz: FUZZ_REPORT_ONLY=1: not failing" >&2; exit 0; }
  exit 1
fi
echo "fuzz: $MODE ok" >&2
