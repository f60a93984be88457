#!/usr/bin/env bash
set -u
tar -xzf .bundle/baton-bundle-slim.tgz -C /tmp; B=/tmp/baton-bundle; L=$OUT/c2; mkdir -p $L
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$B/lib:$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
export PYTHONUNBUFFERED=1
C=$(git log -1 --format=%h); echo $C > $L/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L/commit.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $L/pip.log 2>&1
PYTHONPATH=/tmp/site timeout 120 python3 -u .bundle/probe_cudnn_gelu.py > $L/probe.txt 2>&1
echo "== probe"; cat $L/probe.txt
timeout 150 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models vit --modes baton --budget-s 60 --commit $C > $L/bench.log 2>&1
timeout 60 python3 bench/compile_variant.py --bench-json $L/bench/gpu_bench.json --env BATON_CONV_PATCHES=cudnn --suffix cudnn --models vit > $L/variant.txt 2>&1
timeout 100 python3 bench/env_ab.py --baton $B/bin/baton --program vit=/tmp/bgb/vit.device.baton $(grep -o -- "--b-program [^ ]*" $L/variant.txt) --rounds 3 --json $L/ab-patches.json > $L/ab-patches.txt 2>&1
echo "== ab"; tail -6 $L/ab-patches.txt
python3 tests/e2e/make_models.py /tmp/baton-e2e-models > $L/make_models.log 2>&1; export BATON_MODELS_READY=1
timeout 380 $B/run_gpu_suite.sh $L/a --no-bench --only cuda_conformance_test > $L/suite-a.txt 2>&1 &
timeout 380 $B/run_gpu_suite.sh $L/b --no-bench --only cuda_gpu_test > $L/suite-b.txt 2>&1 &
wait
for s in a b; do echo "== suite $s"; tail -3 $L/suite-$s.txt; done
cd $OUT && tar -czf c2.tgz c2 && rm -rf c2
