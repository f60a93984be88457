#!/usr/bin/env bash
# t3: ResNet-50 b32's max-autotune, merged into t1's table on this machine
. .bundle/env.sh; L=$OUT/t3; mkdir -p $L
timeout 400 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgc --models resnet32 --modes max-autotune --budget-s 60 --compile-timeout 380 --commit $C --merge-into /tmp/cnn/gpu_bench.json > $L/bench.log 2>&1; cp /tmp/cnn/gpu_bench.json $L/merged.json; cp /tmp/cnn/gpu_bench.md $L/merged.md 2>/dev/null; tail -12 $L/bench.log
cd $OUT && tar -czf t3.tgz t3 && rm -rf t3
