#!/usr/bin/env bash
# CNN call 2: max-autotune for SqueezeNet and ResNet-50 b32, merged into d1's table
. .bundle/env.sh; L=$OUT/d2; mkdir -p $L
timeout 590 python3 -u bench/gpu_bench.py --out $L/bench --work /tmp/bgc --models squeezenet,resnet32 --modes max-autotune --budget-s 220 --compile-timeout 340 --commit $C --merge-into /tmp/cnn/gpu_bench.json > $L/bench.log 2>&1
cp /tmp/cnn/gpu_bench.json $L/merged.json; cp /tmp/cnn/gpu_bench.md $L/merged.md; tail -16 $L/bench.log
cd $OUT && tar -czf d2.tgz d2 && rm -rf d2
