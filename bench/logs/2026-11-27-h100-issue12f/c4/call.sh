#!/usr/bin/env bash
set -u
tar -xzf .bundle/baton-bundle.tgz -C /tmp; B=/tmp/baton-bundle; L=$OUT/c4; mkdir -p $L
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$B/lib:$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
export PYTHONUNBUFFERED=1
C=$(git log -1 --format=%h); echo $C > $L/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L/commit.txt
timeout 200 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models vit,bert,mlp --modes baton --budget-s 100 --commit $C > $L/bench.log 2>&1
echo "== bench"; grep -E "baton +median|compile|error|Error" $L/bench.log | head -12
timeout 90 python3 bench/compile_variant.py --bench-json $L/bench/gpu_bench.json --env BATON_GEMM_GELU=kernel --suffix kernel --models vit,bert,mlp > $L/variant.txt 2>&1
P=""; for m in vit bert mlp; do P="$P --program $m=/tmp/bgb/$m.device.baton"; done
timeout 150 python3 bench/env_ab.py --baton $B/bin/baton $P $(grep -o -- "--b-program [^ ]*" $L/variant.txt) --rounds 3 --json $L/ab-gelu.json > $L/ab-gelu.txt 2>&1
echo "== ab"; tail -6 $L/ab-gelu.txt
timeout 40 $B/bin/baton run /tmp/bgb/bert.device.baton --device-io -n 200 --warmup 20 --profile-runs 20 > $L/steps-bert.txt 2>&1
grep -E "loaded in|matmul|latency" $L/steps-bert.txt | head -6
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 400 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 400 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
timeout 400 $B/run_gpu_suite.sh $L/c --no-bench --only cuda_contract_test,cuda_gpu_no_alloc_test,python_test,cli_test,cuda_handles_test,cuda_lifecycle_test,cuda_tuning_test,onnx_node_test > $L/suite-c.txt 2>&1 &
wait
for s in a b c; do echo "== suite $s"; grep -E "exit" $L/suite-$s.txt | cut -c1-150; done
grep -h -E "FAILED|Failure" $L/*/*.log | head -20
cd $OUT && tar -czf c4.tgz c4 && rm -rf c4
