#!/usr/bin/env bash
# y1 (a third machine): why the transformer rows missed on x1's machine. Baton-only compiles and
# timings of ViT, BERT, GPT-2 and the MLP (gpu_bench.py), Baton's per-step GPU medians, and
# torch.compile's wall, GPU span and kernel sum per call in both modes (bench/torch_gpu_time.py)
. .bundle/env.sh; L=$OUT/y1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nproc; grep -m1 "model name" /proc/cpuinfo; } > $L/gpu.txt
timeout 150 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models vit,bert,gpt2,mlp --modes baton --budget-s 120 --commit $C > $L/bench.log 2>&1; tail -8 $L/bench.log
timeout 280 python3 -u bench/torch_gpu_time.py --models vit,bert,gpt2,mlp --modes reduce-overhead,max-autotune --out $L/torch > $L/torch.log 2>&1; grep "^|" $L/torch.log
for m in vit bert gpt2 mlp; do p=/tmp/bgb/$m.device.baton; [ -f $p ] && timeout 20 $B/bin/baton run $p --device-io -n 300 --warmup 30 --profile-runs 20 --export-profile $L/steps-$m.json > $L/steps-$m.txt 2>&1; done
grep -h "latency\|GPU" $L/steps-*.txt | head -12
cd $OUT && tar -czf y1.tgz y1 && rm -rf y1
