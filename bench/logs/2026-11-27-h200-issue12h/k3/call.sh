. .bundle/env.sh; L=$OUT/k3; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name --format=csv; } > $L/gpu.txt
timeout 400 python3 -u bench/logs/2026-11-27-h200-issue12h/k3/k3.py $B/bin/baton $L .bundle/failing.txt 2> $L/k3.log >/dev/null; grep -v Warn $L/k3.log | tail -60
timeout 170 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --only resnet --precisions fp16 --batches 1 --budget-s 150 --commit $(awk '/^commit/{print $2}' $B/BUILD_INFO) > $L/models.log 2>&1; tail -5 $L/models.log
