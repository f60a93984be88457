#!/usr/bin/env bash
set -u
tar -xzf .bundle/baton-bundle.tgz -C /tmp; B=/tmp/baton-bundle; L=$OUT/c5; mkdir -p $L
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$B/lib:$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
export PYTHONUNBUFFERED=1
C=$(git log -1 --format=%h); echo $C > $L/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L/commit.txt
timeout 390 python3 -u bench/gpu_bench.py --baton $B/bin/baton --out $L/bench --work /tmp/bgb --models vit,bert,gpt2,mlp --modes baton,eager,reduce-overhead,max-autotune --budget-s 360 --compile-timeout 200 --commit $C > $L/bench.log 2>&1
echo "== bench"; tail -12 $L/bench.log
BATON_TEST_TIMEOUT=80 timeout 90 $B/run_gpu_suite.sh $L/n --no-bench --only cuda_gpu_no_alloc_test > $L/suite-n.txt 2>&1
grep exit $L/suite-n.txt
timeout 60 python3 bench/compile_variant.py --bench-json $L/bench/gpu_bench.json --env BATON_GEMM_GELU=cudnn --suffix cudnn --models vit,bert > $L/variant.txt 2>&1
P=""; for m in vit bert; do P="$P --program $m=/tmp/bgb/$m.device.baton"; done
timeout 80 python3 bench/env_ab.py --baton $B/bin/baton $P $(grep -o -- "--b-program [^ ]*" $L/variant.txt) --rounds 3 --json $L/ab-gelu-cudnn.json > $L/ab-gelu-cudnn.txt 2>&1
echo "== ab"; tail -4 $L/ab-gelu-cudnn.txt
cd $OUT && tar -czf c5.tgz c5 && rm -rf c5
