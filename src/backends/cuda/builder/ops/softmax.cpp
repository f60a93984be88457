// Softmax on the GPU: one block per row through baton_softmax (device/softmax.cuh).
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/builder/ops/registry.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& s = ctx.value(in).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  // Opsets 1 and 11 normalize over [axis, rank) as one dimension.
  const bool flatten = n.def->since_version < 13;
  const int64_t outer = ops::product(s, 0, axis);
  const int64_t len = flatten ? ops::product(s, axis, s.size()) : s[axis];
  const int64_t inner = flatten ? 1 : ops::product(s, axis + 1, s.size());
  // The block grows with the row, up to 1024 threads; a dynamic engine sizes it for its longest
  // row (the block strides over shorter ones).
  const std::vector<int64_t>& upper = ctx.upper_sizes_of(in);
  const int64_t upper_len = flatten ? ops::product(upper, axis, upper.size()) : upper[axis];
  LaunchShape launch;
  launch.block = 32;
  while (launch.block < 1024 && launch.block < upper_len) launch.block *= 2;
  launch.grid = static_cast<uint32_t>(std::max<int64_t>(1, outer * inner));
  const std::string name = ctx.kernel_name("softmax");
  KernelArgs args = ctx.kernel_args();
  const std::string len_arg = args.value(len), inner_arg = args.value(inner);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ y{}) {{\n  baton_softmax(x, y, {}, {});\n}}\n",
      launch.block, name, device_type_name(ctx.dtype_of(in)), device_type_name(ctx.dtype_of(out)),
      args.parameter(), len_arg, inner_arg);
  ctx.add_kernel(name, std::move(code), launch, {in, out}, args);
  return Status();
}

}  // namespace

const OpLowering kSoftmaxLowering{"Softmax", &float_tensors_only, &lower};

}  // namespace baton::cuda
