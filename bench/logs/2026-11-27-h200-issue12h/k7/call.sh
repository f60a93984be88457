. .bundle/env.sh; L=$OUT/k7; mkdir -p $L /tmp/bgm/onnx
nvidia-smi --query-gpu=name --format=csv > $L/gpu.txt
python3 -c 'import sys; sys.path.insert(0, "bench"); import gpu_common as gc; gc.export_job("resnet", "torchscript17", 1, True, "/tmp/bgm/onnx/torchscript17_resnet.onnx", 16, sys.argv[1])' $L/export.log
timeout 240 python3 -u bench/logs/2026-11-27-h200-issue12h/k7/k7.py $B/bin/baton $L bench/logs/2026-11-27-h200-issue12h/c1/failing-torchscript17-resnet-b1-fp16.inspect.txt 2> $L/k7.log >/dev/null; grep -v Warn $L/k7.log | tail -12
