#!/usr/bin/env bash
# v1: the GPU suite at the bundle's commit (row kernels for squeeze-excite layers, wider column
# reductions) in three groups (cuda_lifecycle_test runs alone at the start of t1), beside
# gpu_models: all six families fp16 b1 (both exporters), then MobileNetV3 fp32/fp16 at b1 and b8
# (b8: the row kernel with 8 rows).
. .bundle/env.sh; L=$OUT/v1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 520 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 540 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 520 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
{ timeout 330 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --precisions fp16 --batches 1 --budget-s 280 --keep --commit $C > $L/models.log 2>&1
  timeout 200 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models-mobilenet --work /tmp/bgm2 --models-from /tmp/bgm/onnx --only mobilenet --precisions fp32,fp16 --batches 1,8 --budget-s 170 --commit $C > $L/models-mobilenet.log 2>&1; } &
wait
for s in a b c; do echo "== suite $s"; grep -E "exit|passed|FAILED" $L/suite-$s.txt | tail -12; done
grep -E "SqueezeExcite" $L/b/cuda_gpu_test.log | head -4
echo "== models"; tail -16 $L/models.log | cut -c1-160
echo "== models mobilenet"; tail -10 $L/models-mobilenet.log | cut -c1-160
cd $OUT && tar -czf v1.tgz v1 && rm -rf v1
