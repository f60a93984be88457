#!/usr/bin/env bash
# Next session, after n1 on the same machine (its programs in /tmp/bgn): own against after-own
# and own against full, alternating rounds.
. .bundle/env.sh; L=$OUT/n2; mkdir -p $L
P=""; for m in resnet resnet32 mobilenet vit bert gpt2 mlp; do f=/tmp/bgn/$m.device.baton; [ -f "$f" ] && P="$P --program $m=$f"; done; echo "programs:$P"
timeout 150 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=after-own $P --rounds 3 --json $L/ab-after-own.json > $L/ab-after-own.txt 2>&1
timeout 150 python3 bench/env_ab.py --baton $B/bin/baton --a BATON_CUDA_GRAPH_EDGES=own --b BATON_CUDA_GRAPH_EDGES=full $P --rounds 3 --json $L/ab-full.json > $L/ab-full.txt 2>&1
tail -10 $L/ab-after-own.txt $L/ab-full.txt
cd $OUT && tar -czf n2.tgz n2 && rm -rf n2
