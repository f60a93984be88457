// Shape and Range on the GPU. A static compile folds both (their values are known then); they
// reach an engine only in a dynamic partition, where they follow the call's sizes: Shape's values
// and Range's length are kernel arguments that the engine patches at each call (the dynamic
// builder fits them from its probes, builder/dynamic_shapes.h). Kept on the GPU, they leave no
// CPU kernel between two engines for a dynamic export's position ids and mask arithmetic.
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// Shape reads only its input's sizes, so any input the engine stores will do.
bool supports_shape(const compiler::Graph& graph, const compiler::IrNode& node) {
  return engine_tensors(graph, node);
}

// One thread per value: y[i] = the input's size along dimension start + i. The sizes are
// arguments; the input's data is not read.
Status lower_shape(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const auto rank = static_cast<int64_t>(x.size());
  // Shape-15 after inference: 0 <= start <= end <= rank, both set; Shape-13 has neither.
  int64_t start = 0, end = rank;
  if (n.def->attr_index("start") >= 0) {
    start = std::clamp<int64_t>(n.attr_int("start"), 0, rank);
    end = std::clamp<int64_t>(n.attr_int("end"), start, rank);
  }
  const std::vector<int64_t> values(x.begin() + start, x.begin() + end);
  const int out = n.outputs[0];
  const std::string name = ctx.kernel_name("shape");
  KernelArgs args = ctx.kernel_args();
  const std::string array = args.array("dims", values);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}* __restrict__ y{}) {{\n{}"
      "  baton_for_each({}, [&](long long i) {{ y[i] = dims[i]; }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(out)), args.parameter(), array, values.size());
  ctx.add_kernel(name, std::move(code), grid_stride_launch(static_cast<int64_t>(values.size())),
                 {out}, args);
  return Status();
}

// An integer Range whose start, limit and delta are known at compile (constants, or sizes the
// dynamic builder evaluates at each probe).
bool supports_range(const compiler::Graph& graph, const compiler::IrNode& node) {
  return tensors_of(graph, node, DTypeSet{DType::Int32, DType::Int64});
}

int64_t scalar_of(const Lowering& ctx, int v) {
  const compiler::IrValue& iv = ctx.value(v);
  return ops::int_values_of(iv.dtype, iv.constant->data(), 1)[0];
}

// One thread per element: y[i] = start + i * delta, for the output's length (an argument, as
// start and delta are).
Status lower_range(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  for (int v : n.inputs) {
    BATON_CHECK_OR_RETURN(ctx.is_constant(v), Internal,
                          "{}: its start, limit and delta must be known at compile", n.describe());
  }
  const int out = n.outputs[0];
  const int64_t count = ops::product(ctx.value(out).sizes);
  const std::string name = ctx.kernel_name("range");
  KernelArgs args = ctx.kernel_args();
  // One statement per argument: the order of a call's arguments is unspecified, and it numbers
  // them (start, delta, count: a.v[0], a.v[1], a.v[2]).
  const std::string start = args.value(scalar_of(ctx, n.inputs[0]));
  const std::string delta = args.value(scalar_of(ctx, n.inputs[2]));
  const std::string length = args.value(count);
  const std::string values =
      fmt::format("  const long long start = {}, delta = {}, count = {};\n", start, delta, length);
  const std::string_view type = device_type_name(ctx.dtype_of(out));
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}* __restrict__ y{}) {{\n{}"
      "  baton_for_each(count, [&](long long i) {{ y[i] = ({})(start + i * delta); }});\n}}\n",
      kBlock, name, type, args.parameter(), values, type);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), {out}, args);
  return Status();
}

}  // namespace

const OpLowering kShapeLowering{
    .op = "Shape", .supports = &supports_shape, .lower = &lower_shape, .types = kEngineTypes};
const OpLowering kRangeLowering{.op = "Range",
                                .supports = &supports_range,
                                .lower = &lower_range,
                                .types = DTypeSet{DType::Int32, DType::Int64}};

}  // namespace baton::cuda
