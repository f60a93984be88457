// ReduceSum, ReduceMean, ReduceMax and ReduceMin on float tensors, and GlobalAveragePool and
// GlobalMaxPool (a mean or a maximum over the spatial dimensions, keeping them as 1), through
// device/reduce.cuh. Layout-aware: the input is read through its strides as stored; a
// channels-last input reduced with keepdims (squeeze-excite's mean over H and W, a global pool)
// gives a channels-last output unless the output is a binding. The reduction is taken in float:
// blocks of columns where the input's innermost dimension is kept and each output reduces 16
// elements or more (16-byte reads along it, device/reduce.cuh), one thread per output element
// where it is kept and the reductions are short, one block per output element where it is
// reduced.
#include "ops/reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// Below this many outputs a reduction over many elements takes a block per output even when the
// innermost dimension is kept: one thread each would leave the GPU idle.
constexpr int64_t kFewOutputs = 512;
constexpr int64_t kLongReduction = 256;
// From this many reduced elements per output, a reduction that keeps the innermost dimension reads
// blocks of columns (fewer: one thread per output, walking them, is as fast).
constexpr int64_t kColumnsMinCount = 16;
// Below this many blocks of columns, each block takes kWideBlock threads.
constexpr int64_t kFewColumnBlocks = 32;
constexpr uint32_t kWideBlock = 1024;
// Split, such a reduction aims at this many blocks (two per SM of an H200), each taking at least
// kMinSplitPositions positions, in at most kMaxSplits parts.
constexpr int64_t kSplitTargetBlocks = 264;
constexpr int64_t kMinSplitPositions = 64;
constexpr int64_t kMaxSplits = 64;

int reduce_op(std::string_view op) {
  if (op == "ReduceSum") return 0;
  if (op == "ReduceMean" || op == "GlobalAveragePool") return 1;
  if (op == "ReduceMax" || op == "GlobalMaxPool") return 2;
  return 3;  // ReduceMin
}

bool is_global(const compiler::IrNode& n) { return n.op_type.rfind("Global", 0) == 0; }

// Which input dimensions node `n` reduces, and whether it keeps them.
Result<std::vector<bool>> reduced_of(const compiler::Graph& g, const compiler::IrNode& n,
                                     bool* keepdims) {
  const int rank = static_cast<int>(g.values[n.inputs[0]].sizes.size());
  if (is_global(n)) {
    *keepdims = true;
    std::vector<bool> reduced(static_cast<size_t>(rank), true);
    reduced[0] = reduced[1] = false;
    return reduced;
  }
  *keepdims = n.attr_int("keepdims") != 0;
  std::optional<std::vector<int64_t>> axes;
  bool noop = false;
  if (n.def->attr_index("axes") >= 0) {
    if (!n.attr("axes").none) axes = n.attr_ints("axes");
  } else {
    noop = n.attr_int("noop_with_empty_axes") != 0;
    if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
      const compiler::IrValue& a = g.values[n.inputs[1]];
      BATON_CHECK_OR_RETURN(a.constant != nullptr, NotSupported,
                            "{}: 'axes' must be known at compile time", n.describe());
      axes = ops::int_values_of(a.dtype, a.constant->data(), *checked_numel(a.sizes));
    }
  }
  return ops::reduced_dims(axes, rank, noop, n.describe());
}

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node)) return false;
  if (is_global(node) && graph.values[node.inputs[0]].sizes.size() < 3) return false;
  bool keepdims = false;
  return reduced_of(graph, node, &keepdims).ok();
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(in).sizes;
  bool keepdims = false;
  BATON_ASSIGN_OR_RETURN(const std::vector<bool> reduced, reduced_of(ctx.graph(), n, &keepdims));
  const std::vector<int64_t> xs = ctx.strides_of(in);
  // The output's memory order over the input's dimensions: channels-last follows a
  // channels-last input when the output keeps rank 4.
  std::vector<size_t> order(x.size());
  for (size_t d = 0; d < x.size(); ++d) order[d] = d;
  if (keepdims && ctx.channels_last(in) && ctx.set_channels_last(out)) order = {0, 2, 3, 1};
  std::vector<int64_t> ksizes, kstrides, rsizes, rstrides;
  // The same dimensions at a dynamic engine's maxima (a static engine's own sizes): the choices
  // that shape the kernel's code (which kernel, its block size) are made from these, so that
  // every size one engine runs shares its code; only the launch's grid follows the sizes. (A
  // squeeze-excite pool picked a wider block at batch 2 than at batch 16, and MobileNetV3 could
  // not be one engine over batch 2..16.)
  std::vector<int64_t> kupper, rupper;
  const std::vector<int64_t>& ux = ctx.upper_sizes_of(in);
  int64_t count = 1;
  bool inner_reduced = false;
  for (size_t d : order) {
    if (reduced[d] || x[d] == 1) continue;
    ksizes.push_back(x[d]);
    kstrides.push_back(xs[d]);
    kupper.push_back(ux[d]);
  }
  for (size_t d = 0; d < x.size(); ++d) {
    if (!reduced[d] || x[d] == 1) continue;
    rsizes.push_back(x[d]);
    rstrides.push_back(xs[d]);
    rupper.push_back(ux[d]);
    count *= x[d];
    if (xs[d] == 1) inner_reduced = true;
  }
  if (ksizes.empty()) ksizes = kstrides = kupper = {1};
  if (rsizes.empty()) rsizes = rstrides = rupper = {1};
  const int64_t outputs = ops::product(ctx.value(out).sizes);
  const int64_t upper_count = ops::product(rupper);
  const int64_t upper_outputs = ops::product(ctx.upper_sizes_of(out));
  const std::string name = ctx.kernel_name("reduce");
  // Sizes, magics and strides of the kept and reduced dimensions, as arguments (or constants).
  // Every index is below the input's element count.
  KernelArgs args = ctx.kernel_args();
  const bool fast = args.magic_division(ops::product(x));
  auto dims = [&](const char* prefix, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides) {
    return args.array(fmt::format("{}s", prefix), sizes) +
           args.array(fmt::format("{}m", prefix), division_magics(sizes, fast)) +
           args.array(fmt::format("{}st", prefix), strides);
  };
  // When the innermost kept dimension is the input's innermost (channels-last pools) and the rest
  // of the kept dimensions collapse into one outer stride: blocks of columns (reduce.cuh,
  // baton_reduce_columns), V elements per access (16 bytes of the input's type, when every
  // offset is a multiple of V).
  const int64_t inner = ksizes.back();
  const int64_t outer = ksizes.size() == 2 ? ksizes[0] : 1;
  const int64_t outer_stride = ksizes.size() == 2 ? kstrides[0] : 0;
  int v = static_cast<int>(16 / dtype_size(ctx.dtype_of(in)));
  auto divides = [&](int64_t s) { return s % v == 0; };
  if (!divides(inner) || !divides(outer_stride) ||
      !std::all_of(rstrides.begin(), rstrides.end(), divides)) {
    v = 1;
  }
  const int lanes = v > 1 ? 8 : 32;
  const int64_t groups = (inner + lanes * v - 1) / (lanes * v);
  const int64_t upper_blocks =
      (kupper.size() == 2 ? kupper[0] : 1) * ((kupper.back() + lanes * v - 1) / (lanes * v));
  // A grid past 2^31 blocks falls back to the kernels below, which stride over their outputs.
  if (!inner_reduced && upper_count >= kColumnsMinCount && kstrides.back() == 1 &&
      ksizes.size() <= 2 && upper_blocks < (int64_t{1} << 31)) {
    const std::string arrays = dims("r", rsizes, rstrides);
    const std::string inner_arg = args.value(inner), stride_arg = args.value(outer_stride),
                      count_arg = args.value(count);
    // Few blocks over long columns: split each block's positions over more blocks (reduce.cuh,
    // baton_reduce_columns_part), then a second kernel combines each output's partials. Decided
    // at the engine's maxima, as everything that shapes the code is.
    const int64_t splits =
        upper_blocks < kFewColumnBlocks &&
                ctx.target().options.reduce_columns == ReduceColumns::Split
            ? std::clamp<int64_t>(std::min((kSplitTargetBlocks + upper_blocks - 1) / upper_blocks,
                                           upper_count / kMinSplitPositions),
                                  1, kMaxSplits)
            : 1;
    // One kernel of the columns' blocks writing the output, or, split, splits times as many
    // blocks writing their partial results to float scratch and a second kernel combining them.
    // Not split (too few positions to, or reduce_columns=whole), few blocks take the largest
    // block size, so that more rows of threads share each block's positions.
    const bool split = splits > 1;
    const int written = split ? ctx.new_scratch(DType::Float32, {outer * splits * inner}) : out;
    LaunchShape launch;
    launch.block =
        !split && upper_blocks < kFewColumnBlocks && upper_count >= kWideBlock / lanes * 4
            ? kWideBlock
            : kBlock;
    launch.grid = static_cast<uint32_t>(outer * groups * splits);
    std::string code = fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({block}) {name}(const {in}* __restrict__ "
        "x, {out}* __restrict__ y{params}) {{\n{arrays}"
        "  baton_reduce_columns{part}<{m}, {op}, {v}, {lanes}, {rows}{splits}, {fast}>(x, y, "
        "{inner}, {stride}, BatonDims<{m}>{{rs, rm, rst}}, {count});\n}}\n",
        fmt::arg("block", launch.block), fmt::arg("name", name),
        fmt::arg("in", device_type_name(ctx.dtype_of(in))),
        fmt::arg("out", split ? "float" : device_type_name(ctx.dtype_of(out))),
        fmt::arg("params", args.parameter()), fmt::arg("arrays", arrays),
        fmt::arg("part", split ? "_part" : ""), fmt::arg("m", rsizes.size()),
        fmt::arg("op", reduce_op(n.op_type)), fmt::arg("v", v), fmt::arg("lanes", lanes),
        fmt::arg("rows", launch.block / lanes),
        fmt::arg("splits", split ? fmt::format(", {}", splits) : ""),
        fmt::arg("fast", fast ? "true" : "false"), fmt::arg("inner", inner_arg),
        fmt::arg("stride", stride_arg), fmt::arg("count", count_arg));
    ctx.add_kernel(name, std::move(code), launch, {in, written}, args);
    if (!split) return Status();
    KernelArgs fargs = ctx.kernel_args();
    const std::string finish = ctx.kernel_name("reduce_finish");
    const std::string f_inner = fargs.value(inner), f_outputs = fargs.value(outputs),
                      f_count = fargs.value(count);
    std::string fcode = fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const float* __restrict__ p, "
        "{2}* __restrict__ y{3}) {{\n"
        "  baton_reduce_columns_finish<{4}, {5}>(p, y, {6}, {7}, {8});\n}}\n",
        kBlock, finish, device_type_name(ctx.dtype_of(out)), fargs.parameter(),
        reduce_op(n.op_type), splits, f_inner, f_outputs, f_count);
    ctx.add_kernel(finish, std::move(fcode), grid_stride_launch(outputs), {written, out}, fargs);
    return Status();
  }
  const bool block =
      inner_reduced || (upper_outputs < kFewOutputs && upper_count >= kLongReduction);
  LaunchShape launch = grid_stride_launch(outputs);
  if (block) {
    launch.block = 32;
    while (launch.block < 256 && launch.block < upper_count) launch.block *= 2;
    launch.grid = static_cast<uint32_t>(std::clamp<int64_t>(outputs, 1, int64_t{1} << 20));
  }
  const std::string arrays = dims("k", ksizes, kstrides) + dims("r", rsizes, rstrides);
  const std::string outputs_arg = args.value(outputs), count_arg = args.value(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "{3}* __restrict__ y{11}) {{\n{5}"
      "  baton_reduce_{7}<{4}, {6}, {8}, {12}>(x, y, {9}, BatonDims<{4}>{{ks, km, kst}}, "
      "BatonDims<{6}>{{rs, rm, rst}}, {10});\n}}\n",
      block ? launch.block : kBlock, name, device_type_name(ctx.dtype_of(in)),
      device_type_name(ctx.dtype_of(out)), ksizes.size(), arrays, rsizes.size(),
      block ? "block" : "thread", reduce_op(n.op_type), outputs_arg, count_arg, args.parameter(),
      fast ? "true" : "false");
  ctx.add_kernel(name, std::move(code), launch, {in, out}, args);
  return Status();
}

}  // namespace

const OpLowering kReduceSumLowering{"ReduceSum", &supports, &lower, 0, "", true};
const OpLowering kReduceMeanLowering{"ReduceMean", &supports, &lower, 0, "", true};
const OpLowering kReduceMaxLowering{"ReduceMax", &supports, &lower, 0, "", true};
const OpLowering kReduceMinLowering{"ReduceMin", &supports, &lower, 0, "", true};
const OpLowering kGlobalAveragePoolLowering{"GlobalAveragePool", &supports, &lower, 0, "", true};
const OpLowering kGlobalMaxPoolLowering{"GlobalMaxPool", &supports, &lower, 0, "", true};

}  // namespace baton::cuda
