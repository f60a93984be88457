#!/usr/bin/env bash
. .bundle/env.sh; L=$OUT/e2; mkdir -p $L /tmp/bgm/onnx
nvidia-smi --query-gpu=name --format=csv > $L/gpu.txt; E2_JOBS=4 timeout 420 python3 -u .bundle/e2.py $B/bin/baton $L 16 > $L/e2.log 2>&1; cat $L/e2.log | tail -30
cd $OUT && tar -czf e2.tgz e2 && rm -rf e2
