// Concat on the GPU: one kernel reads each output element from the input whose slice of the axis
// it falls in (baton_concat_index, device/layout.cuh).
#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  // One pointer per input plus the output, within a kernel step's operand limit.
  return float_tensors_only(graph, node) && node.inputs.size() + 1 <= kMaxKernelOperands;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  const std::vector<int64_t>& s = ctx.value(out).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  const int64_t inner = ops::product(s, axis + 1, s.size());
  const int64_t total = s[axis];
  std::string params, body;
  std::vector<int> operands;
  int64_t start = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int v = n.inputs[k];
    const int src = ctx.is_constant(v) ? ctx.weight(v, ctx.activation_dtype()) : v;
    operands.push_back(src);
    const int64_t size = ctx.value(v).sizes[axis];
    params += fmt::format("const {}* __restrict__ x{}, ", device_type_name(ctx.dtype_of(src)), k);
    body += fmt::format(
        "    {}if (c.axis < {}LL) st(&y[i], to_f(x{}[(c.outer * {}LL + (c.axis - {}LL)) * {}LL + "
        "c.inner]));\n",
        k ? "else " : "", start + size, k, size, start, inner);
    start += size;
  }
  operands.push_back(out);
  const int64_t count = ops::product(s);
  const std::string name = ctx.kernel_name("concat");
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}{}* __restrict__ y) {{\n"
      "  baton_for_each({}LL, [&](long long i) {{\n"
      "    const ConcatIndex c = baton_concat_index(i, {}LL, {}LL);\n{}  }});\n}}\n",
      kBlock, name, params, device_type_name(ctx.dtype_of(out)), count, total, inner, body);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands));
  return Status();
}

}  // namespace

const OpLowering kConcatLowering{"Concat", &supports, &lower};

}  // namespace baton::cuda
