#!/usr/bin/env bash
# call 1: the whole GPU suite at the bundle's commit, the full-size models against PyTorch (fp16,
# batch 1, both exporters), and every cuDNN plan of ResNet-50's fp16 convolutions with its notes
# and its deviation from the reference plan (diag.py)
. .bundle/env.sh; L=$OUT/c1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $L/gpu.txt
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 500 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 560 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 500 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_lifecycle_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
timeout 520 python3 -u bench/gpu_models.py --baton $B/bin/baton --out $L/models --work /tmp/bgm --precisions fp16 --batches 1 --budget-s 420 --commit $C > $L/models.log 2>&1 &
timeout 540 python3 -u .bundle/diag.py $B/bin/baton $L > $L/diag.log 2>&1 &
wait
for s in a b c; do echo "== suite $s"; tail -4 $L/suite-$s.txt; done
echo "== models"; tail -25 $L/models.log
echo "== diag"; cat $L/diag.log; for b in 1 32; do f=$L/plans-resnet-b$b.log; echo "b$b: $(grep -c 'cuDNN plan' $f) plans, $(grep -c ', rejected' $f) rejected, $(grep -c reduced-precision $f) reduced-precision"; grep ' rejected for' $f | head -5; done
cd $OUT && tar -czf c1.tgz c1 && rm -rf c1
