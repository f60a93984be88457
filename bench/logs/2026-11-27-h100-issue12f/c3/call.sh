#!/usr/bin/env bash
L=$OUT/c3; mkdir -p $L
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
[ -d /tmp/site/cudnn ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PYTHONPATH=/tmp/site timeout 200 python3 -u .bundle/probe_cudnn_gelu.py 2>&1 | tee $L/probe.txt
