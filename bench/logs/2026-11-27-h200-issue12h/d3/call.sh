#!/usr/bin/env bash
# CNN call 3: max-autotune for MobileNetV3, merged into d1's table
. .bundle/env.sh; L=$OUT/d3; mkdir -p $L
timeout 592 python3 -u bench/gpu_bench.py --out $L/bench --work /tmp/bgc --models mobilenet --modes max-autotune --budget-s 60 --compile-timeout 570 --commit $C --merge-into /tmp/cnn/gpu_bench.json > $L/bench.log 2>&1
cp /tmp/cnn/gpu_bench.json $L/merged.json; cp /tmp/cnn/gpu_bench.md $L/merged.md; tail -16 $L/bench.log
cd $OUT && tar -czf d3.tgz d3 && rm -rf d3
