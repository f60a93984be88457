. .bundle/env.sh; L=$OUT/k1; mkdir -p $L
timeout 200 python3 -u .bundle/k1.py $B/bin/baton $L 2>&1 | tee $L/k1.log | grep -v Warning
