// Transpose on the GPU: a gather through permuted strides (baton_transpose, device/layout.cuh).
#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& s = ctx.value(in).sizes;
  const std::vector<int64_t>& perm = n.attr_ints("perm");  // canonical: always present
  const size_t rank = s.size();
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * s[d];
  std::vector<int64_t> out_sizes(rank), strides(rank);
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    out_sizes[d] = s[perm[d]];
    strides[d] = in_strides[perm[d]];
    count *= out_sizes[d];
  }
  const std::string name = ctx.kernel_name("transpose");
  const LaunchShape launch = grid_stride_launch(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ y) {{\n"
      "  constexpr long long sizes[{}] = {};\n"
      "  constexpr long long strides[{}] = {};\n"
      "  baton_transpose<{}>(x, y, {}LL, sizes, strides);\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(in)), device_type_name(ctx.dtype_of(out)), rank,
      int_list(out_sizes), rank, int_list(strides), rank, count);
  ctx.add_kernel(name, std::move(code), launch, {in, out});
  return Status();
}

}  // namespace

const OpLowering kTransposeLowering{"Transpose", &float_tensors_only, &lower};

}  // namespace baton::cuda
