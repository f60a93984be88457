. .bundle/env.sh; L=$OUT/k5; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name --format=csv; } > $L/gpu.txt
mkdir -p /tmp/bgm/onnx; timeout 150 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --only resnet --exporters torchscript17 --precisions fp16 --batches 1 --budget-s 130 --commit $(awk '/^commit/{print $2}' $B/BUILD_INFO) > $L/models.log 2>&1; tail -3 $L/models.log
timeout 250 python3 -u bench/logs/2026-11-27-h200-issue12h/k5/k5.py $B/bin/baton $L .bundle/failing.txt 2> $L/k5.log >/dev/null; grep -v Warn $L/k5.log | tail -20
