#!/usr/bin/env bash
# diagnosis: full-size ResNet-50 from the dynamo exporter fails fp16 against PyTorch (c1); which switch changes it
. .bundle/env.sh; L=$OUT/e1; mkdir -p $L
G="python3 -u bench/gpu_models.py --baton $B/bin/baton --only resnet --batches 1 --commit $C --keep"
$G --work /tmp/bgm --out $L/base --precisions fp32,fp16 > $L/base.log 2>&1
grep -E "pass|fail" $L/base.log | cut -c1-140
for p in dynamo18 torchscript17; do $B/bin/baton inspect /tmp/bgm/programs/${p}_resnet_b1_fp16.baton > $L/inspect-$p.txt 2>&1; done
for v in BATON_TUNE_CANDIDATES=1 BATON_REDUCE_COLUMNS=0 BATON_CUDA_PDL=0 BATON_TUNE_CANDIDATES=4 BATON_TUNE_CANDIDATES=16; do
  echo "== $v"; env $v $G --work /tmp/bgm-$v --models-from /tmp/bgm/onnx --exporters dynamo18 --out $L/$v --precisions fp16 > $L/$v.log 2>&1
  grep -E "pass|fail" $L/$v.log | cut -c1-140
  $B/bin/baton inspect /tmp/bgm-$v/programs/dynamo18_resnet_b1_fp16.baton > $L/inspect-$v.txt 2>&1
done
cd $OUT && tar -czf e1.tgz e1 && rm -rf e1
