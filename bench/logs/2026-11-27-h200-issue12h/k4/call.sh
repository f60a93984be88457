. .bundle/env.sh; L=$OUT/k4; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name --format=csv; } > $L/gpu.txt
mkdir -p /tmp/bgm/onnx; timeout 150 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --only resnet --precisions fp16 --batches 1 --budget-s 130 --commit $(awk '/^commit/{print $2}' $B/BUILD_INFO) > $L/models.log 2>&1; tail -4 $L/models.log
timeout 250 python3 -u bench/logs/2026-11-27-h200-issue12h/k4/k4.py $B/bin/baton $L .bundle/failing.txt 2> $L/k4.log >/dev/null; grep -v Warn $L/k4.log | grep -v "deviation 0.00e+00" | tail -40
BATON_TEST_TIMEOUT=100 timeout 110 $B/run_gpu_suite.sh $L/t --no-bench --only cuda_tuning_test > $L/suite-t.txt 2>&1; grep "exit" $L/suite-t.txt
