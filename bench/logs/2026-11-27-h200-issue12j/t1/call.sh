#!/usr/bin/env bash
# t1: cuda_lifecycle_test alone; the CNN rows: Baton, eager, reduce-overhead for all four, and
# max-autotune as far as the budget goes (ResNet-50 b1 first); the others' max-autotune in t2, t3
. .bundle/env.sh; L=$OUT/t1; mkdir -p $L /tmp/cnn
timeout 20 $B/run_gpu_suite.sh $L/lifecycle --no-bench --only cuda_lifecycle_test > $L/lifecycle.txt 2>&1; grep exit $L/lifecycle.txt; grep -h "cycles" $L/lifecycle/cuda_lifecycle_test.log
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 560 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out /tmp/cnn --work /tmp/bgc --models resnet,resnet32,mobilenet,squeezenet --modes baton,eager,reduce-overhead,max-autotune --budget-s 235 --compile-timeout 310 --commit $C > $L/bench.log 2>&1
cp -r /tmp/cnn $L/bench; tail -16 $L/bench.log
cd $OUT && tar -czf t1.tgz t1 && rm -rf t1
