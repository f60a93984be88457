#!/usr/bin/env bash
# r1 (after the final review): the new conformance cases on cuda:0 (BATON_CONFORMANCE_ONLY), and
# cuda_gpu_test's convolution and squeeze-excite cases, at the review's bundle
. .bundle/env.sh; L=$OUT/r1; mkdir -p $L
{ cat $B/BUILD_INFO; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L/gpu.txt
for f in "1x1 of a 1x1 input" "[600, 24]" "[4, 300, 3]" "pointwise 1x1"; do
  echo "== BATON_CONFORMANCE_ONLY='$f'"; BATON_CONFORMANCE_ONLY="$f" timeout 120 $B/bin/cuda_conformance_test > "$L/conformance-$(echo $f | tr -c 'a-z0-9' _).log" 2>&1; echo "exit $?"; grep -h "cuda conformance:\|PASSED\|FAILED" $L/conformance-$(echo $f | tr -c 'a-z0-9' _).log | head -3
done
timeout 150 $B/bin/cuda_gpu_test --gtest_filter='*SqueezeExcite*:*Convolution*:*FireModule*' > $L/gpu_test.log 2>&1; echo "gpu_test exit $?"; grep -E "^\[ +(OK|FAILED|PASSED) " $L/gpu_test.log
cd $OUT && tar -czf r1.tgz r1 && rm -rf r1
