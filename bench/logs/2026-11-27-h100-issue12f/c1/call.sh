#!/usr/bin/env bash
# session call 1: profile ViT/BERT engines (as run) at HEAD, then the GPU suite
set -u
tar -xzf .bundle/baton-bundle.tgz -C /tmp; B=/tmp/baton-bundle; L=$OUT/c1; mkdir -p $L
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$B/lib:$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
git log -1 --format=%h >> $L/gpu.txt
( timeout 200 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models vit,bert --modes baton --budget-s 150 --commit $(git log -1 --format=%h) > $L/bench.log 2>&1
  timeout 120 python3 -u bench/profile_models.py --bench-json $L/bench/gpu_bench.json --out $L/prof --as-run > $L/prof.log 2>&1
  for m in vit bert; do p=$(ls /tmp/bgb/${m}*device.baton 2>/dev/null | head -1); [ -n "$p" ] && timeout 40 $B/bin/baton run $p --device-io -n 200 --warmup 20 --profile-runs 20 --export-profile $L/steps-$m.json > $L/steps-$m.txt 2>&1; done ) 
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 330 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 330 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 330 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_lifecycle_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
wait
for s in a b c; do echo "== suite $s"; tail -5 $L/suite-$s.txt; done
cat $L/prof/profile.md 2>/dev/null | head -60
cd $OUT && tar -czf c1.tgz c1 && rm -rf c1
