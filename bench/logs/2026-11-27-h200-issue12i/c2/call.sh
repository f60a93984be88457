#!/usr/bin/env bash
# call 2: the transformer rows and the MLP, every runner in one invocation; then the
# per-step GPU medians of GPT-2 and the MLP
. .bundle/env.sh; L=$OUT/c2; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 560 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models-from /tmp/bgm/onnx --models vit,bert,gpt2,mlp --modes baton,eager,reduce-overhead,max-autotune --budget-s 430 --compile-timeout 150 --commit $C > $L/bench.log 2>&1
mkdir -p /tmp/c2-bench && cp $L/bench/gpu_bench.json /tmp/c2-bench/
for m in gpt2 mlp; do p=/tmp/bgb/$m.device.baton; [ -f $p ] && timeout 15 $B/bin/baton run $p --device-io -n 200 --warmup 20 --profile-runs 20 --export-profile $L/steps-$m.json > $L/steps-$m.txt 2>&1; done
tail -22 $L/bench.log
cd $OUT && tar -czf c2.tgz c2 && rm -rf c2
