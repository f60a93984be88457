#!/usr/bin/env bash
# the host-side goals: a one-operator program with device I/O, three invocations
. .bundle/env.sh; L=$OUT/c3h; mkdir -p $L; cat $B/BUILD_INFO | head -1; $B/bin/baton compile bench/models/relu_1024.onnx --device cuda:0 --io device -o /tmp/relu.baton > $L/relu-compile.txt 2>&1; for i in 1 2 3; do timeout 40 $B/bin/baton_host_overhead_bench /tmp/relu.baton --iterations 20000 --warmup 2000 >> $L/host-overhead.txt 2>&1; done; cat $L/host-overhead.txt | tail -30
