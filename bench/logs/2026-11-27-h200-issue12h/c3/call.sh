#!/usr/bin/env bash
# call 3: the host-side goals (three invocations); the row-kernel A/B on GPT-2 (its program of
# call 2 against the same compile with BATON_ROW_COPY=0); Nsight Compute on call 2's programs
. .bundle/env.sh; L=$OUT/c3; mkdir -p $L
$B/bin/baton compile bench/models/relu_1024.onnx --device cuda:0 --io device -o /tmp/relu.baton > $L/relu-compile.txt 2>&1
for i in 1 2 3; do timeout 40 $B/bin/baton_host_overhead_bench /tmp/relu.baton --iterations 20000 --warmup 2000 >> $L/host-overhead.txt 2>&1; done
cat $L/host-overhead.txt
timeout 90 python3 bench/compile_variant.py --bench-json /tmp/c2-bench/gpu_bench.json --env BATON_ROW_COPY=0 --suffix loop --models gpt2 > $L/variant.txt 2>&1
timeout 80 python3 bench/env_ab.py --baton $B/bin/baton --program gpt2=/tmp/bgb/gpt2.device.baton $(grep -o -- "--b-program [^ ]*" $L/variant.txt) --rounds 3 --json $L/ab-row-copy.json > $L/ab-row-copy.txt 2>&1
echo "== ab"; tail -5 $L/ab-row-copy.txt
timeout 300 python3 -u bench/profile_models.py --bench-json /tmp/c2-bench/gpu_bench.json --out $L/prof --as-run > $L/prof.log 2>&1
tail -8 $L/prof.log
cd $OUT && tar -czf c3.tgz c3 && rm -rf c3
