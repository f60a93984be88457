#!/usr/bin/env bash
# A fuzz campaign: Baton's six libFuzzer targets side by side, JOBS fuzzing processes each, for
# SECONDS; then the executions and the findings per target. Runs from a bundle
# (scripts/make_bundle.sh --fuzz) on a host with no compiler, or in the tree (scripts/fuzz.sh
# campaign, `make fuzz`).
#
#   fuzz_campaign.sh OUTDIR SECONDS JOBS [TARGET...]
#
# OUTDIR gets a few files only (so that a machine that returns few files can return them all):
#   summary.tsv    one row per target: seconds (wall clock; the processes run side by side),
#                  processes, fuzzer runs, executions (the sum of libFuzzer's final
#                  `stat::number_of_executed_units` over every run), exec/s, findings by kind
#                  (crash, leak, timeout, oom: distinct inputs), distinct findings (signatures),
#                  corpus size, runs that printed no statistics, leak detection on/off, commit
#   findings.tsv   one row per distinct finding: target, signature id, kind, inputs, what the
#                  sanitizer said, the top frames of Baton's code, an example input
#   reports.txt    the sanitizer report of one input per distinct finding
#   crashes.tgz    TARGET/SIGNATURE/{report.txt, inputs} (at most FUZZ_KEEP inputs per finding)
#   corpus.tgz     the corpora reached (FUZZ_RESUME=corpus.tgz starts a later campaign from them)
#   campaign.log   what this script said
# Reproduce a finding with the fuzz build of the same commit: build-fuzz/fuzz/TARGET INPUT.
#
# How: each of the JOBS processes per target is a loop that runs the fuzzer until the deadline
# and starts it again after a finding; all of a target's processes share one corpus folder
# (libFuzzer's -reload picks up what the others found). libFuzzer's own -jobs stops a job at its
# first finding, and -fork keeps no final statistics of its children, so neither gives the
# executions exactly; this loop does, and goes on past known crashes.
#
# Environment: FUZZ_WORK (the corpora, kept across campaigns, and each campaign's logs and
# artifacts in run-*/; default ${TMPDIR:-/tmp}/baton-fuzz), FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_RSS_MB (default 2048), FUZZ_KEEP
# (inputs kept per finding, default 5), FUZZ_LSAN_SUPPRESSIONS (default: the bundle's
# fuzz/lsan.supp), FUZZ_RESUME (a corpus.tgz of an earlier campaign),
# FUZZ_PACK_CORPUS=0 (no corpus.tgz: the corpora stay in FUZZ_WORK),
# FUZZ_SYMBOLIZER (default: the bundle's addr2line, else llvm-symbolizer), and where the parts
# are: FUZZ_BIN_DIR, FUZZ_DICT_DIR, FUZZ_SEED_DIR, FUZZ_REGRESSION_DIR (default: the bundle's
# fuzz/bin, fuzz/dict, fuzz/seeds, fuzz/regressions).
set -uo pipefail

usage() { echo "usage: $0 OUTDIR SECONDS JOBS [TARGET...]" >&2; exit 2; }
[ $# -ge 3 ] || usage
OUTDIR=$1
DURATION=$2
JOBS=$3
shift 3
[[ "$DURATION" =~ ^[0-9]+$ && "$JOBS" =~ ^[1-9][0-9]*$ ]] || usage
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(fuzz_program fuzz_engine_blob fuzz_onnx fuzz_npy fuzz_onnx_cuda fuzz_cli)

HERE=$(cd "$(dirname "$0")" && pwd)
BIN_DIR=${FUZZ_BIN_DIR:-$HERE/fuzz/bin}
DICT_DIR=${FUZZ_DICT_DIR:-$HERE/fuzz/dict}
SEED_DIR=${FUZZ_SEED_DIR:-$HERE/fuzz/seeds}
REGRESSION_DIR=${FUZZ_REGRESSION_DIR:-$HERE/fuzz/regressions}
WORK=${FUZZ_WORK:-${TMPDIR:-/tmp}/baton-fuzz}
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}
KEEP=${FUZZ_KEEP:-5}
mkdir -p "$OUTDIR" "$WORK" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(cd "$WORK" && pwd)
# The corpora persist in WORK (campaigns with the same FUZZ_WORK accumulate); logs and artifacts
# are this campaign's own.
RUN=$WORK/run-$(date -u +%Y%m%dT%H%M%SZ)-$$
LOG=$OUTDIR/campaign.log
: >"$LOG"
say() { echo "fuzz_campaign: $*" | tee -a "$LOG" >&2; }

# The bundle's shared libraries (OpenBLAS, protobuf, ...; libbfd for addr2line).
[ -d "$HERE/lib" ] && export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SYMBOLIZER=${FUZZ_SYMBOLIZER:-}
if [ -z "$SYMBOLIZER" ]; then
  if [ -x "$HERE/bin/addr2line" ]; then SYMBOLIZER=$HERE/bin/addr2line
  else SYMBOLIZER=$(command -v llvm-symbolizer || true); fi
fi
# Sanitizers stop at the first report; leaks are findings. The sanitizer runtimes recognize an
# external symbolizer by its file name (llvm-symbolizer or addr2line).
symbolize=0
[ -n "$SYMBOLIZER" ] && symbolize="1:external_symbolizer_path=$SYMBOLIZER"
ASAN_BASE="allocator_may_return_null=1:symbolize=$symbolize"
# Leaks of allocations Baton does not own (the CUDA driver's): fuzz/lsan.supp says which and why.
SUPPRESSIONS=${FUZZ_LSAN_SUPPRESSIONS:-$HERE/fuzz/lsan.supp}
[ -f "$SUPPRESSIONS" ] && export LSAN_OPTIONS="suppressions=$SUPPRESSIONS"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:symbolize=$symbolize"
# OpenBLAS would start a thread per core in every process; the fuzzers are the parallelism.
export OPENBLAS_NUM_THREADS=1

commit=unknown
[ -f "$HERE/fuzz/BUILD_INFO" ] && commit=$(awk '/^commit/ {print $2}' "$HERE/fuzz/BUILD_INFO")
[ "$commit" = unknown ] && commit=$(git -C "$HERE" describe --always --dirty 2>/dev/null || echo unknown)
say "$DURATION s, $JOBS process(es) per target, ${TARGETS[*]}; commit $commit; $(nproc) cores;" \
    "corpora in $WORK, logs in $RUN; symbolizer ${SYMBOLIZER:-none}"

for target in "${TARGETS[@]}"; do
  [ -x "$BIN_DIR/$target" ] || { say "$BIN_DIR/$target is missing"; exit 2; }
done
if [ -n "${FUZZ_RESUME:-}" ]; then
  tar -xzf "$FUZZ_RESUME" -C "$WORK" || { say "cannot read FUZZ_RESUME=$FUZZ_RESUME"; exit 2; }
  say "corpora resumed from $FUZZ_RESUME"
fi

# Seeds and regression inputs join the corpus under their SHA-1, the name libFuzzer gives the
# inputs it adds; a seed that crashes can then be taken out by the name of its artifact.
for target in "${TARGETS[@]}"; do
  corpus=$WORK/corpus/$target
  mkdir -p "$corpus" "$RUN/artifacts/$target" "$RUN/logs/$target"
  for dir in "$SEED_DIR/$target" "$REGRESSION_DIR/$target"; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 -type f ! -name '.*' -exec sha1sum {} + | while read -r sha path; do
      [ -e "$corpus/$sha" ] || cp "$path" "$corpus/$sha"
    done
  done
  [ -n "$(ls -A "$corpus")" ] || say "$target: no seeds (starts from an empty corpus)"
done

START=$(date +%s)
DEADLINE=$((START + DURATION))

# One fuzzing process slot: runs the fuzzer until the deadline, again after each finding. On
# SIGTERM (the campaign interrupted) it stops its fuzzer, which still prints its statistics.
worker() {
  local target=$1 w=$2 run=0 startup_failures=0 leaks=1 child="" stopping=0
  local bin=$BIN_DIR/$target corpus=$WORK/corpus/$target artifacts=$RUN/artifacts/$target/
  # fuzz_onnx_cuda reads the same ONNX as fuzz_onnx: one dictionary.
  local name=${target#fuzz_}
  local dict=$DICT_DIR/${name%_cuda}.dict flags=()
  [ -f "$dict" ] && flags+=(-dict="$dict")
  trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM
  while ((!stopping)); do
    local now left log rc artifact
    now=$(date +%s)
    left=$((DEADLINE - now))
    ((left >= 2)) || break
    log=$RUN/logs/$target/w$w.r$run.log
    run=$((run + 1))
    # An input stuck past -timeout at the deadline gets SIGTERM (libFuzzer prints its statistics
    # then), SIGKILL 30 s later.
    ASAN_OPTIONS="$ASAN_BASE:detect_leaks=$leaks" timeout -k 30 $((left + TIMEOUT + 30)) \
      "$bin" -max_total_time="$left" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
      -malloc_limit_mb="$RSS_MB" -artifact_prefix="$artifacts" -print_final_stats=1 \
      -print_funcs=0 -reload=1 "${flags[@]}" "$corpus" >"$log" 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    ((stopping)) && { wait "$child"; break; }
    child=""
    ((rc == 0)) && continue
    if grep -q "LeakSanitizer has encountered a fatal error" "$log"; then
      # LeakSanitizer cannot stop the world here (no ptrace in some containers): go on without it.
      leaks=0
      echo "LeakSanitizer does not work on this host" >"$RUN/logs/$target/LEAKS_OFF"
      continue
    fi
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | awk '{print $NF}')
    if [ -n "$artifact" ]; then
      # A seed or corpus input that fails would fail every restart: take it out of the corpus.
      rm -f "$corpus/${artifact##*-}"
    elif ! grep -q "INITED" "$log"; then
      startup_failures=$((startup_failures + 1))
      if ((startup_failures >= 3)); then
        echo "$target: process $w stopped: the fuzzer failed to start 3 times (last: $log)" >&2
        tail -5 "$log" >&2
        break
      fi
      sleep 1
    fi
  done
}

pids=()
stop() {
  say "interrupted: stopping the fuzzers, then summarizing"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
}
trap stop INT TERM
for target in "${TARGETS[@]}"; do
  for ((w = 0; w < JOBS; w++)); do
    worker "$target" "$w" 2>>"$LOG" &
    pids+=($!)
  done
done
# `wait` returns early when a trapped signal arrives: wait until every worker has ended.
for pid in "${pids[@]}"; do
  while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
done
trap - INT TERM
ELAPSED=$(($(date +%s) - START))

# The signature of a finding, from the log of the run that found it: what the sanitizer or the
# target said (addresses and values blanked out) and the first three frames outside the
# sanitizer and libFuzzer runtimes, the C library and the C++ runtime's terminate path.
signature() {
  awk '
    function blank(s) { gsub(/0x[0-9a-fA-F]+/, "ADDR", s); gsub(/[0-9]+/, "N", s); return s }
    !head && / runtime error: / {
      i = index($0, " runtime error: "); where = substr($0, 1, i - 1); sub(/^.*\/(src|include|fuzz)\//, "", where)
      head = where " runtime error: " blank(substr($0, i + 16)); next }
    !head && /^baton fuzz: / { n = split($0, p, ": "); head = p[1] ": " p[2] (n > 3 ? ": " blank(p[3]) : ""); next }
    !head && /ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)/ {
      s = $0; sub(/^.*ERROR: /, "", s); sub(/ on (unknown )?address.*$/, "", s); head = blank(s); next }
    head && nframes < 3 && /^ *#[0-9]+ 0x[0-9a-f]+ / {
      if ($0 ~ /lib(c|m|stdc\+\+|gcc_s)\.so/) next
      f = $0
      if (f ~ / in /) {
        sub(/^[^#]*#[0-9]+ 0x[0-9a-f]+ in /, "", f); sub(/ \(BuildId: [^)]*\)$/, "", f)
        if (f ~ / \([^ ]*\+0x[0-9a-f]+\)$/) sub(/ \([^ ]*\+0x[0-9a-f]+\)$/, "", f)
        else sub(/ [^ ]*$/, "", f)
      } else { sub(/^[^(]*\(/, "", f); sub(/\).*$/, "", f); sub(/^.*\//, "", f) }
      if (f ~ /^(\?\?|__sanitizer|__asan|__ubsan|__lsan|__interceptor|___interceptor|fuzzer::|__GI_|__libc|__pthread|pthread_kill|raise|abort|gsignal|__cxa_|__cxxabiv1|__gnu_cxx::__verbose|std::terminate|__terminate|operator new|operator delete|malloc|calloc|realloc|free|LLVMFuzzerTestOneInput|main|_start)/) next
      frames = frames (nframes ? " < " : "") f; nframes++
    }
    END { if (!head) head = "no report (exit without a sanitizer message)"; if (!frames) frames = "-"
          print head "\t" frames }
  ' "$1"
}

# Findings: every artifact that a run wrote, with the signature from that run's log.
FINDINGS=$RUN/findings.raw
: >"$FINDINGS"
declare -A recorded  # an input that several processes found counts once
for target in "${TARGETS[@]}"; do
  for log in "$RUN"/logs/"$target"/w*.log; do
    [ -f "$log" ] || continue
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | awk '{print $NF}')
    [ -n "$artifact" ] && [ -f "$artifact" ] && [ -z "${recorded[$artifact]:-}" ] || continue
    recorded[$artifact]=1
    name=$(basename "$artifact")
    kind=${name%%-*}
    [ "$kind" = slow ] && continue
    sig=$(signature "$log")
    id=$(printf '%s\t%s' "$target" "$sig" | sha1sum | cut -c1-10)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$id" "$kind" "$artifact" "$log" "$sig" >>"$FINDINGS"
  done
done

# Per distinct finding: the count, one report, up to FUZZ_KEEP inputs.
rm -rf "$RUN/pack" && mkdir -p "$RUN/pack"
{
  printf 'target\tsignature\tkind\tinputs\twhat\tframes\texample\n'
  sort -t$'\t' -k1,1 -k2,2 "$FINDINGS" | awk -F'\t' '
    { key = $1 "\t" $2; if (!(key in n)) { order[++k] = key; row[key] = $0 } n[key]++ }
    END { for (i = 1; i <= k; i++) { split(row[order[i]], r, "\t")
            a = r[4]; sub(/^.*\//, "", a)
            printf "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r[1], r[2], r[3], n[order[i]], r[6], r[7], a } }'
} >"$OUTDIR/findings.tsv"
: >"$OUTDIR/reports.txt"
tail -n +2 "$OUTDIR/findings.tsv" | while IFS=$'\t' read -r target id kind count what frames example; do
  dir=$RUN/pack/$target/$id
  mkdir -p "$dir"
  awk -F'\t' -v t="$target" -v i="$id" '$1 == t && $2 == i {print $4}' "$FINDINGS" | head -n "$KEEP" |
    while read -r a; do cp "$a" "$dir/"; done
  log=$(awk -F'\t' -v t="$target" -v i="$id" '$1 == t && $2 == i {print $5; exit}' "$FINDINGS")
  # The report: from the first line the sanitizer or the target wrote to the artifact line.
  awk '/runtime error: |^baton fuzz: |ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|^ALARM: / {on = 1}
       on {print} /Test unit written to/ {exit}' "$log" >"$dir/report.txt"
  {
    echo "=== $target $id: $kind, $count input(s): $what"
    echo "    frames: $frames"
    echo "    example: $example"
    cat "$dir/report.txt"
    echo
  } >>"$OUTDIR/reports.txt"
done
tar -czf "$OUTDIR/crashes.tgz" -C "$RUN/pack" .
if [ "${FUZZ_PACK_CORPUS:-1}" = 1 ]; then
  tar -czf "$OUTDIR/corpus.tgz" -C "$WORK" corpus
  say "corpus.tgz: $(du -h "$OUTDIR/corpus.tgz" | cut -f1)"
fi

count() { awk -F'\t' -v t="$1" -v k="$2" '$1 == t && $3 == k' "$FINDINGS" | wc -l; }
# Per target: executions from every run's final statistics, findings by kind.
{
  printf 'target\tseconds\tprocesses\truns\texecutions\texec_per_s\tcrash\tleak\ttimeout\toom\tdistinct\tcorpus\truns_without_stats\tleak_detection\tcommit\tdate\tcores\n'
  for target in "${TARGETS[@]}"; do
    runs=0 execs=0 nostats=0
    for log in "$RUN"/logs/"$target"/w*.log; do
      [ -f "$log" ] || continue
      runs=$((runs + 1))
      n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
      if [ -n "$n" ]; then execs=$((execs + n)); else nostats=$((nostats + 1)); fi
    done
    distinct=$(awk -F'\t' -v t="$target" '$1 == t {print $2}' "$FINDINGS" | sort -u | wc -l)
    leak_detection=on
    [ -f "$RUN/logs/$target/LEAKS_OFF" ] && leak_detection=off
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" \
      "$ELAPSED" "$JOBS" "$runs" "$execs" $((execs / (ELAPSED > 0 ? ELAPSED : 1))) \
      "$(count "$target" crash)" "$(count "$target" leak)" "$(count "$target" timeout)" \
      "$(count "$target" oom)" "$distinct" \
      "$(find "$WORK/corpus/$target" -type f | wc -l)" "$nostats" "$leak_detection" "$commit" \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(nproc)"
  done
} >"$OUTDIR/summary.tsv"

if command -v column >/dev/null; then column -t -s$'\t' "$OUTDIR/summary.tsv"; else cat "$OUTDIR/summary.tsv"; fi |
  tee -a "$LOG" >&2
if [ "$(wc -l <"$OUTDIR/findings.tsv")" -gt 1 ]; then
  say "distinct findings (reports.txt has each report, crashes.tgz the inputs):"
  tail -n +2 "$OUTDIR/findings.tsv" | cut -f1-5 | tee -a "$LOG" >&2
fi
say "results in $OUTDIR"
