#!/usr/bin/env bash
# call a1: the whole GPU suite at the bundle's commit; gpu_models fp16 b1 (its ONNX exports are
# reused by c2); k8.py: the failing plan of issue 12's eighth pass under each graph-edge mode, and
# fresh ResNet-50 compiles checked in the graph by default
. .bundle/env.sh; L=$OUT/a1; mkdir -p $L /tmp/k8
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 500 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 540 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 500 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_lifecycle_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
timeout 500 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --precisions fp16 --batches 1 --budget-s 400 --commit $C > $L/models.log 2>&1 &
{ python3 -c 'import sys; sys.path.insert(0, "bench"); import gpu_common as gc; gc.export_job("resnet", "torchscript17", 1, True, "/tmp/k8/torchscript17_resnet.onnx", 4, sys.argv[1])' $L/export.log
  timeout 420 python3 -u bench/logs/2026-11-27-h200-issue12i/a1/k8.py $B/bin/baton bench/logs/2026-11-27-h200-issue12h/c1/failing-torchscript17-resnet-b1-fp16.inspect.txt 4 2> $L/k8.log > /dev/null; } &
wait
for s in a b c; do echo "== suite $s"; grep -E "exit|passed|FAILED" $L/suite-$s.txt | tail -12; done
grep -A3 "LibrariesProgrammatic" $L/c/cuda_tuning_test.log | grep -E "step|OK|FAIL|SKIP" | head -4
echo "== models"; tail -15 $L/models.log | cut -c1-150
echo "== k8"; grep -v Warn $L/k8.log | cut -c1-260
cd $OUT && tar -czf a1.tgz a1 && rm -rf a1
