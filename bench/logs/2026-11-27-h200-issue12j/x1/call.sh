#!/usr/bin/env bash
# x1 (a second machine: t1-t3's went back after 30 minutes held): the transformer rows and the
# MLP, every runner in one invocation; then the MLP's max-autotune if the budget skipped it
. .bundle/env.sh; L=$OUT/x1; mkdir -p $L /tmp/x1-bench
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 500 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out /tmp/x1-bench --work /tmp/bgb --models vit,bert,gpt2,mlp --modes baton,eager,reduce-overhead,max-autotune --budget-s 400 --compile-timeout 150 --commit $C > $L/bench.log 2>&1
grep -q "mlp max-autotune: skipped" $L/bench.log && timeout 70 python3 -u bench/gpu_bench.py --out $L/bench-mlp --work /tmp/bgb --models mlp --modes max-autotune --budget-s 30 --compile-timeout 60 --commit $C --merge-into /tmp/x1-bench/gpu_bench.json > $L/bench-mlp.log 2>&1
cp -r /tmp/x1-bench $L/bench; tail -14 /tmp/x1-bench/gpu_bench.md
cd $OUT && tar -czf x1.tgz x1 && rm -rf x1
