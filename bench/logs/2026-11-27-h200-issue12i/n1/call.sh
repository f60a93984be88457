#!/usr/bin/env bash
# Next session's first call (prepared, not run): what serializing the libraries' programmatic
# graph edges costs, per model. Compiles every table workload (gpu_bench.py, Baton only), then
# A/B on the same programs: BATON_CUDA_GRAPH_EDGES=own (default) against =captured, and own
# against full, alternating rounds (bench/env_ab.py, device I/O). Timings only: =captured is the
# configuration that gave wrong ResNet-50 results.
. .bundle/env.sh; L=$OUT/n1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
timeout 300 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgn --models resnet,resnet32,mobilenet,vit,bert,gpt2,mlp --modes baton --budget-s 240 --commit $C > $L/bench.log 2>&1
P=""; for m in resnet resnet32 mobilenet vit bert gpt2 mlp; do f=/tmp/bgn/$m.device.baton; [ -f "$f" ] && P="$P --program $m=$f"; done; echo "programs:$P"
timeout 130 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=captured $P --rounds 3 --json $L/ab-captured.json > $L/ab-captured.txt 2>&1
timeout 130 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=full $P --rounds 3 --json $L/ab-full.json > $L/ab-full.txt 2>&1
tail -12 $L/ab-captured.txt $L/ab-full.txt
cd $OUT && tar -czf n1.tgz n1 && rm -rf n1
