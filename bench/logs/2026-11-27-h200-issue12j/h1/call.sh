#!/usr/bin/env bash
# h1: the host-side goals, three invocations, on the machine of t1-t3
. .bundle/env.sh; L=$OUT/h1; mkdir -p $L
$B/bin/baton compile bench/models/relu_1024.onnx --device cuda:0 --io device -o /tmp/relu.baton > $L/relu-compile.txt 2>&1
for i in 1 2 3; do timeout 40 $B/bin/baton_host_overhead_bench /tmp/relu.baton --iterations 20000 --warmup 2000 >> $L/host-overhead.txt 2>&1; done
cat $L/host-overhead.txt
cd $OUT && tar -czf h1.tgz h1 && rm -rf h1
