#!/usr/bin/env bash
# c1 again (the suites beside gpu_models.py, fp16 b1), programs kept; if the dynamo18 ResNet-50 fp16
# case fails again, rerun that program alone, and the same ONNX in fp32
. .bundle/env.sh; L=$OUT/r1; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv > $L/gpu.txt
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 500 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 500 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 500 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_lifecycle_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
timeout 480 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --precisions fp16 --batches 1 --budget-s 400 --keep --commit $C > $L/models.log 2>&1 &
wait
grep -E " fail | error " $L/models.log | cut -c1-200; tail -1 $L/models.log
P=/tmp/bgm/programs/dynamo18_resnet_b1_fp16.baton
md5sum /tmp/bgm/onnx/*resnet*.onnx > $L/onnx-md5.txt
if grep -q "resnet     dynamo18.* fail" $L/models.log; then
  $B/bin/baton inspect $P > $L/inspect-failing.txt 2>&1
  cp -r /tmp/bgm/outputs/dynamo18_resnet_b1_fp16 $L/failing-out 2>/dev/null
  timeout 200 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/again --work /tmp/bgm2 --models-from /tmp/bgm/onnx --only resnet --exporters dynamo18 --precisions fp32,fp16 --batches 1 --keep --commit $C > $L/again.log 2>&1
  grep -E "pass|fail" $L/again.log | cut -c1-160
  for k in 1 2 3; do $B/bin/baton run $P -o /tmp/rr$k -n 1 --warmup 0 -q --input input=/tmp/bgm/inputs/resnet_b1.input.npy; done
  python3 -c "
import numpy as np,sys; sys.path.insert(0,'bench'); import gpu_common as gc
a=[np.load(gc.baton_output_file(f'/tmp/rr{k}')) for k in (1,2,3)]; f=np.load(gc.baton_output_file('/tmp/bgm/outputs/dynamo18_resnet_b1_fp16'))
b=np.load(gc.baton_output_file('/tmp/bgm2/outputs/dynamo18_resnet_b1_fp16'))
print('failing program rerun vs its first run:', [gc.relative_error(x,f) for x in a], 'vs a fresh compile:', [gc.relative_error(x,b) for x in a])"
fi
cd $OUT && tar -czf r1.tgz r1 && rm -rf r1
