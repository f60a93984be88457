#!/usr/bin/env bash
# CNN call 1: the CNN rows: Baton, eager, reduce-overhead for all four, max-autotune for
# ResNet-50 b1, after cuda_lifecycle_test alone (it failed beside other GPU processes in a1) (the others' max-autotune in d2 and d3, merged into this table on this machine)
. .bundle/env.sh; L=$OUT/d1; mkdir -p $L /tmp/cnn
timeout 20 $B/run_gpu_suite.sh $L/lifecycle --no-bench --only cuda_lifecycle_test > $L/lifecycle.txt 2>&1; grep exit $L/lifecycle.txt; grep -h "cycles" $L/lifecycle/cuda_lifecycle_test.log
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 575 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out /tmp/cnn --work /tmp/bgc --models resnet,resnet32,mobilenet,squeezenet --modes baton,eager,reduce-overhead,max-autotune --budget-s 235 --compile-timeout 330 --commit $C > $L/bench.log 2>&1
cp -r /tmp/cnn $L/bench; tail -14 $L/bench.log
cd $OUT && tar -czf d1.tgz d1 && rm -rf d1
