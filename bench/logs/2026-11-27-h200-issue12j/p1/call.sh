#!/usr/bin/env bash
# p1: where MobileNetV3's time goes at the fix, and what the serialized library edges cost.
# Bundle ff74222 (the engine last validated on a GPU; HEAD differs only by an off-by-default
# branch removed). Baton-only compiles of MobileNetV3, ResNet-50, SqueezeNet and BERT; MobileNetV3's
# per-step GPU medians and one graph replay's kernels under Nsight Compute at the GPU's own clocks;
# A/B own (default) against captured on all four, own against full on the two small CNNs.
. .bundle/env.sh; L=$OUT/p1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 170 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgn --models mobilenet,resnet,squeezenet,bert --modes baton --budget-s 150 --commit $C > $L/bench.log 2>&1
tail -8 $L/bench.log
p=/tmp/bgn/mobilenet.device.baton
timeout 20 $B/bin/baton run $p --device-io -n 200 --warmup 20 --profile-runs 20 --export-profile $L/steps-mobilenet.json > $L/steps-mobilenet.txt 2>&1
timeout 120 python3 bench/profile_models.py --bench-json $L/bench/gpu_bench.json --out $L/ncu --only mobilenet,squeezenet --as-run --timeout 100 > $L/ncu.log 2>&1; tail -3 $L/ncu.log
P=""; for m in mobilenet resnet squeezenet bert; do f=/tmp/bgn/$m.device.baton; [ -f "$f" ] && P="$P --program $m=$f"; done; echo "programs:$P"
timeout 120 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=captured $P --rounds 3 --json $L/ab-captured.json > $L/ab-captured.txt 2>&1
timeout 60 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=full --program mobilenet=$p --program squeezenet=/tmp/bgn/squeezenet.device.baton --rounds 3 --json $L/ab-full.json > $L/ab-full.txt 2>&1
tail -8 $L/ab-captured.txt $L/ab-full.txt
cd $OUT && tar -czf p1.tgz p1 && rm -rf p1
