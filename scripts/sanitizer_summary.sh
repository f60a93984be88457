#!/usr/bin/env bash
# What compute-sanitizer reported in its LOG files, summed over them, as one line:
#   SUMMARY: N error      (memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors")
#   SUMMARY: N hazard     (racecheck: "RACECHECK SUMMARY: N hazards displayed ...")
#   no summary            (no file has one: the tool or the program did not finish)
# Used by run_gpu_suite.sh --sanitize and bench/gpu_checks.py. Usage: sanitizer_summary.sh LOG...
grep -Eho "(ERROR SUMMARY|RACECHECK SUMMARY): [0-9]+ (error|hazard)" "$@" 2>/dev/null |
  awk '{n += $3; k = $4; seen = 1} END {if (seen) print "SUMMARY: " n " " k; else print "no summary"}'
