#!/usr/bin/env bash
# t2: MobileNetV3's max-autotune, merged into t1's table on this machine; then MobileNetV3's
# kernels under Nsight Compute (as run) and A/B of its program against one compiled with
# BATON_CONV_ROWS=cudnn (squeeze-excite layers on cuDNN)
. .bundle/env.sh; L=$OUT/t2; mkdir -p $L
timeout 430 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgc --models mobilenet --modes max-autotune --budget-s 60 --compile-timeout 420 --commit $C --merge-into /tmp/cnn/gpu_bench.json > $L/bench.log 2>&1; cp /tmp/cnn/gpu_bench.json $L/merged.json; cp /tmp/cnn/gpu_bench.md $L/merged.md 2>/dev/null; tail -12 $L/bench.log
timeout 60 python3 bench/profile_models.py --bench-json /tmp/cnn/gpu_bench.json --out $L/ncu --only mobilenet --as-run --timeout 50 > $L/ncu.log 2>&1; grep -A1 "^| mobilenet" $L/ncu/profile.md | head -2
timeout 40 $B/bin/baton run /tmp/bgc/mobilenet.device.baton --device-io -n 200 --warmup 20 --profile-runs 20 --export-profile $L/steps-mobilenet.json > $L/steps-mobilenet.txt 2>&1
timeout 60 python3 bench/compile_variant.py --bench-json /tmp/cnn/gpu_bench.json --env BATON_CONV_ROWS=cudnn --suffix cudnnrows --models mobilenet > $L/variant.txt 2>&1; cat $L/variant.txt | tail -2
A=$(tail -1 $L/variant.txt); timeout 60 python3 bench/env_ab.py --baton $B/bin/baton $A --rounds 3 --json $L/ab-rows.json > $L/ab-rows.txt 2>&1; tail -3 $L/ab-rows.txt
cd $OUT && tar -czf t2.tgz t2 && rm -rf t2
