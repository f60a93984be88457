#!/usr/bin/env bash
# machine A, call 3: the host-side goals (three invocations), then Nsight Compute on the
# transformer and MLP programs of call 2, as run
. .bundle/env.sh; L=$OUT/c3; mkdir -p $L
$B/bin/baton compile bench/models/relu_1024.onnx --device cuda:0 --io device -o /tmp/relu.baton > $L/relu-compile.txt 2>&1
for i in 1 2 3; do timeout 40 $B/bin/baton_host_overhead_bench /tmp/relu.baton --iterations 20000 --warmup 2000 >> $L/host-overhead.txt 2>&1; done
cat $L/host-overhead.txt
timeout 300 python3 -u bench/profile_models.py --bench-json /tmp/c2-bench/gpu_bench.json --out $L/prof --as-run > $L/prof.log 2>&1
tail -8 $L/prof.log
cd $OUT && tar -czf c3.tgz c3 && rm -rf c3
