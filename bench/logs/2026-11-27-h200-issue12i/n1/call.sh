#!/usr/bin/env bash
# Next session's first call (prepared, not run). (1) Is the experimental edge mode after-own
# right? The tuning test's bottleneck and the failing ResNet-50 case under it. (2) What the edge
# modes cost: every table workload compiled (gpu_bench.py, Baton only), then A/B on the same
# programs, own (the default) against captured (what serializing costs at most). n2 runs the
# other A/Bs on the same machine.
. .bundle/env.sh; L=$OUT/n1; mkdir -p $L /tmp/edges
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
for m in own after-own captured; do BATON_CUDA_GRAPH_EDGES=$m timeout 60 $B/bin/cuda_tuning_test --gtest_filter='*Libraries*' > $L/tuning-$m.log 2>&1; echo "tuning test as $m: exit $? $(grep -o 'worst relative error.*' $L/tuning-$m.log)"; done
python3 -c 'import sys; sys.path.insert(0, "bench"); import gpu_common as gc; gc.export_job("resnet", "torchscript17", 1, True, "/tmp/edges/torchscript17_resnet.onnx", 8, sys.argv[1])' $L/export.log
timeout 200 python3 -u bench/logs/2026-11-27-h200-issue12i/n1/edges.py $B/bin/baton bench/logs/2026-11-27-h200-issue12h/c1/failing-torchscript17-resnet-b1-fp16.inspect.txt /tmp/edges/torchscript17_resnet.onnx own,after-own,captured 3 2> $L/edges.log > /dev/null; grep -v Warn $L/edges.log
timeout 240 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgn --models resnet,resnet32,mobilenet,vit,bert,gpt2,mlp --modes baton --budget-s 200 --commit $C > $L/bench.log 2>&1
P=""; for m in resnet resnet32 mobilenet vit bert gpt2 mlp; do f=/tmp/bgn/$m.device.baton; [ -f "$f" ] && P="$P --program $m=$f"; done; echo "programs:$P" | tee $L/programs.txt
timeout 120 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=captured $P --rounds 3 --json $L/ab-captured.json > $L/ab-captured.txt 2>&1
tail -10 $L/ab-captured.txt
cd $OUT && tar -czf n1.tgz n1 && rm -rf n1
