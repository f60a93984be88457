#!/usr/bin/env bash
# the MLP's max-autotune (c2's budget skipped it), merged into c2's table on the same machine
. .bundle/env.sh; L=$OUT/c2m; mkdir -p $L; timeout 200 python3 -u bench/gpu_bench.py --out $L/bench --work /tmp/bgb --models mlp --modes max-autotune --budget-s 150 --compile-timeout 170 --commit $C --merge-into /tmp/c2-bench/gpu_bench.json > $L/bench.log 2>&1; cp /tmp/c2-bench/gpu_bench.json $L/merged.json; cp /tmp/c2-bench/gpu_bench.md $L/merged.md 2>/dev/null; tail -14 $L/bench.log
