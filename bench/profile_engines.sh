#!/usr/bin/env bash
# Where an engine's GPU time goes: per-kernel durations (Nsight Compute) and the time per call with
# and without CUDA graphs, for the example MLP and the 4096-wide benchmark MLP.
# Run on the GPU host from the repository root, after extracting the bundle:
#   bench/profile_engines.sh /tmp/baton-bundle LOG_DIR
set -uo pipefail
BUNDLE=$1
LOG=${2:-/tmp/baton-profile}
mkdir -p "$LOG"
PY=$(command -v python3)
SITE=$("$PY" -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$BUNDLE/lib:$(ls -d "$SITE"/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
B=$BUNDLE/bin/baton
BENCH=$BUNDLE/bin/baton_bench
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)

"$B" compile -q examples/mlp.onnx -o /tmp/small.baton --device cuda:0 --io device
"$PY" - <<'PYEOF'
import torch
class Mlp(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.net = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(4096, 4096), torch.nn.GELU())])
    def forward(s, x): return s.net(x)
torch.manual_seed(0)
torch.onnx.export(Mlp().eval(), (torch.randn(8, 4096),), "/tmp/big.onnx", dynamo=False, opset_version=17,
                  input_names=["input"], output_names=["output"])
PYEOF
"$B" compile -q /tmp/big.onnx -o /tmp/big.baton --device cuda:0 --precision fp16 --io device
"$B" inspect /tmp/small.baton | grep -E "step [0-9]"
"$B" inspect /tmp/big.baton | grep -E "step [0-9]"
for prog in small big; do
  for graphs in 1 0; do
    echo "$prog graphs=$graphs: $("$BENCH" /tmp/$prog.baton --iterations 300 --warmup 30 --load-option cuda_graphs=$graphs)"
  done
done
if [ -n "$NCU" ]; then
  for prog in small big; do
    "$NCU" --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \
      "$BENCH" /tmp/$prog.baton --iterations 3 --warmup 2 --load-option cuda_graphs=0 \
      > "$LOG/ncu_$prog.txt" 2>&1
    echo "== ncu $prog (last call's kernels)"
    grep -E "^  [A-Za-z_].*\(|gpu__time_duration.sum|sm__cycles_elapsed" "$LOG/ncu_$prog.txt" | tail -30
  done
else
  echo "ncu not found"
fi
