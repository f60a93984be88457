#include "backends/cuda/builder/ops/registry.h"

#include "baton/core/tensor.h"
#include "ops/op_def.h"

namespace baton::cuda {

std::span<const OpLowering> op_lowerings() {
  static const std::vector<OpLowering> all = [] {
    std::vector<OpLowering> list = {kGemmLowering,     kMatMulLowering,    kLinearLowering,
                                    kSoftmaxLowering,  kTransposeLowering, kConcatLowering,
                                    kIdentityLowering, kReshapeLowering,   kFlattenLowering,
                                    kSqueezeLowering,  kUnsqueezeLowering, kConvLowering};
    // Transformer ops.
    list.push_back(kLayerNormLowering);
    list.push_back(kAddLayerNormLowering);
    list.push_back(kAttentionLowering);
    for (const OpLowering& l : elementwise_lowerings()) list.push_back(l);
    return list;
  }();
  return all;
}

const OpLowering* find_lowering(std::string_view op, std::string_view domain) {
  for (const OpLowering& l : op_lowerings()) {
    if (l.op == op && l.domain == domain) return &l;
  }
  return nullptr;
}

bool float_tensors_only(const compiler::Graph& graph, const compiler::IrNode& node) {
  auto float_tensor = [&](int v) {
    if (v < 0) return true;
    const compiler::IrValue& iv = graph.values[v];
    const bool float_type =
        iv.dtype == DType::Float32 || iv.dtype == DType::Float16 || iv.dtype == DType::BFloat16;
    const auto n = checked_numel(iv.sizes);
    return float_type && iv.sizes.size() <= kEngineMaxRank && n.has_value() && *n > 0;
  };
  for (int v : node.outputs) {
    if (v < 0 || !float_tensor(v)) return false;
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int v = node.inputs[i];
    if (v < 0) continue;
    if (node.def->input_slot(i).shape_input) {
      if (!graph.values[v].constant) return false;
      continue;
    }
    if (!float_tensor(v)) return false;
  }
  return true;
}

}  // namespace baton::cuda
