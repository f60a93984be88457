// MaxPool and AveragePool on the GPU: one thread per output element through baton_pool
// (device/pool.cuh), over 1 to 3 spatial dimensions. Layout-aware: the input is read through its
// strides as stored, and a channels-last input gives a channels-last output (unless the output is
// a binding, which is row-major), so a pool between two convolutions reads and writes NHWC with
// consecutive threads on consecutive channels, 16 bytes of channels per thread where they allow.
// MaxPool's optional Indices output is not computed here: such nodes stay on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) return false;  // Indices
  if (node.outputs.empty() || node.outputs[0] < 0) return false;
  const DTypeSet floats{DType::Float32, DType::Float16, DType::BFloat16};
  const compiler::IrValue& x = graph.values[node.inputs[0]];
  const compiler::IrValue& y = graph.values[node.outputs[0]];
  const auto n = checked_numel(y.sizes);
  return x.sizes.size() >= 3 && x.sizes.size() <= 5 && floats.contains(x.dtype) &&
         floats.contains(y.dtype) && n.has_value() && *n > 0;
}

// The canonical form (ops/pool.cpp) fills in dilations where the op's version has them; the
// versions before dilations pool without them (1).
std::vector<int64_t> dilations_of(const compiler::IrNode& n, size_t spatial) {
  if (n.def->attr_index("dilations") < 0) return std::vector<int64_t>(spatial, 1);
  return n.attr_ints("dilations");
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(in).sizes;
  const std::vector<int64_t>& y = ctx.value(out).sizes;
  const size_t r = x.size() - 2;
  // Canonical form (ops/pool.cpp): explicit pads, strides filled in; dilations where the
  // version has them.
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  const std::vector<int64_t> strides = n.attr_ints("strides");
  const std::vector<int64_t> dilations = dilations_of(n, r);
  const std::vector<int64_t> pads = n.attr_ints("pads");
  int mode = 0;
  if (n.op_type == "AveragePool") {
    const bool include =
        n.def->attr_index("count_include_pad") >= 0 && n.attr_int("count_include_pad") == 1;
    mode = include ? 2 : 1;
  }
  // The output's memory order: channels-last follows a channels-last input.
  std::vector<int> dims(r + 2);
  std::iota(dims.begin(), dims.end(), 0);
  if (ctx.channels_last(in) && ctx.set_channels_last(out)) dims = {0, 2, 3, 1};
  std::vector<int64_t> order_sizes;
  for (int d : dims) order_sizes.push_back(y[d]);
  // Channels-last, each thread takes v consecutive channels with one 16-byte access of the wider
  // of the two types (device/pool.cuh) when the channels and the input's other strides allow it.
  const std::vector<int64_t> xs = ctx.strides_of(in);
  int v = 1;
  if (dims.size() == 4 && dims[3] == 1) {
    const int wide = static_cast<int>(
        16 / std::max(dtype_size(ctx.dtype_of(in)), dtype_size(ctx.dtype_of(out))));
    if (xs[1] == 1 && y[1] % wide == 0 && xs[0] % wide == 0 && xs[2] % wide == 0 &&
        xs[3] % wide == 0) {
      v = wide;
    }
  }
  order_sizes.back() /= v;
  std::vector<int64_t> head(pads.begin(), pads.begin() + r), tail(pads.begin() + r, pads.end());
  std::vector<int64_t> spatial(x.begin() + 2, x.end());
  std::string dim_list = "{";
  for (size_t i = 0; i < dims.size(); ++i) dim_list += fmt::format("{}{}", i ? ", " : "", dims[i]);
  dim_list += "}";
  const int64_t count = ops::product(y) / v;  // threads' items: v elements each
  const std::string name = ctx.kernel_name(mode == 0 ? "maxpool" : "avgpool");
  // The output's and input's sizes and strides are arguments; the window (kernel, strides,
  // dilations, pads: attributes) stays in the code.
  KernelArgs args = ctx.kernel_args();
  const bool fast = args.magic_division(count);
  const std::string arrays = args.array("sizes", order_sizes) +
                             args.array("magic", division_magics(order_sizes, fast)) +
                             args.array("xs", xs) + args.array("in", spatial);
  const std::string count_arg = args.value(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "{3}* __restrict__ y{16}) {{\n{4}"
      "  constexpr int dims[{5}] = {6};\n"
      "  constexpr long long k[{7}] = {8};\n"
      "  constexpr long long s[{7}] = {9};\n"
      "  constexpr long long d[{7}] = {10};\n"
      "  constexpr long long head[{7}] = {11};\n"
      "  constexpr long long tail[{7}] = {12};\n"
      "  baton_pool<{7}, {13}, {14}, {17}>(x, y, {15}, sizes, magic, dims, xs, in, k, s, d, "
      "head, tail);\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(in)), device_type_name(ctx.dtype_of(out)), arrays,
      r + 2, dim_list, r, int_list(kernel), int_list(strides), int_list(dilations), int_list(head),
      int_list(tail), mode, fast ? "true" : "false", count_arg, args.parameter(), v);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), {in, out}, args);
  return Status();
}

}  // namespace

const OpLowering kMaxPoolLowering{"MaxPool", &supports, &lower, 0, "", true};
const OpLowering kAveragePoolLowering{"AveragePool", &supports, &lower, 0, "", true};

}  // namespace baton::cuda
