. .bundle/env.sh; L=$OUT/k2; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv > $L/gpu.txt
timeout 580 python3 -u bench/logs/2026-11-27-h200-issue12h/k2/k2.py $B/bin/baton $L .bundle/failing.txt > $L/k2.log 2>&1; grep -v Warn $L/k2.log | tail -70
