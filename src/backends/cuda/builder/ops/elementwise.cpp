// Elementwise ops on the GPU: every row of the elementwise table (src/ops/elementwise.h) and
// Gelu. Runs of them become one generated kernel each: a node joins the open run when it has the
// run's shape and reads something the run produced; results read outside the run are stored,
// the rest stay in registers. Inputs broadcast through strides, scalar constants are baked in.
#include "ops/elementwise.h"

#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/activation.h"

namespace baton::cuda {

namespace {

// Row `row`'s device expression with its attribute values (in the row's order) baked in as
// literals.
std::string row_expression(const ops::ElementwiseRow& row, const ops::ElementwiseArgs& values) {
  std::string expression(row.device);
  for (size_t i = 0; i < row.num_attrs; ++i) {
    const std::string placeholder = "{" + std::string(row.attrs[i].name) + "}";
    const std::string literal = float_literal(static_cast<float>(values[i]));
    for (size_t at = expression.find(placeholder); at != std::string::npos;
         at = expression.find(placeholder, at + literal.size())) {
      expression.replace(at, placeholder.size(), literal);
    }
  }
  return expression;
}

}  // namespace

// The device expression a node computes: its table row's, with the node's attribute values
// baked in as literals, or Gelu's form.
std::string elementwise_expression(const compiler::IrNode& n) {
  if (n.op_type == "Gelu") {
    return n.attr_string("approximate") == "tanh" ? "baton_gelu_tanh({x})" : "baton_gelu({x})";
  }
  const ops::ElementwiseRow& row = *ops::find_elementwise(n.op_type);
  ops::ElementwiseArgs values{};
  for (size_t i = 0; i < row.num_attrs; ++i) {
    const ops::ElementwiseAttr& a = row.attrs[i];
    values[i] = a.kind == ops::ElementwiseAttrKind::Flag ? static_cast<double>(n.attr_int(a.name))
                                                         : n.attr_float(a.name);
  }
  return row_expression(row, values);
}

std::string activation_expression(const ops::Activation& act) {
  if (act.none()) return std::string(kCopyExpression);
  if (act.op == "Gelu") return "baton_gelu({x})";
  if (act.op == "GeluTanh") return "baton_gelu_tanh({x})";
  if (act.op == "Silu") return "({x} * baton_sigmoid({x}))";
  return row_expression(*ops::find_elementwise(act.op), act.params);
}

namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  return float_tensors_only(graph, node);
}

// The integer rows the GPU takes: what a dynamic export computes on sizes and indices (position
// ids, mask offsets: `batch_index * sequence + position`), which would otherwise leave the GPU for
// one CPU kernel between two engines. Exact in the stored integer type; Div and Mod are left out
// (a division by zero cannot be reported from a kernel).
constexpr DTypeSet kIntegerArithmetic{DType::Int32, DType::Int64};
bool integer_arithmetic(std::string_view op) { return op == "Add" || op == "Sub" || op == "Mul"; }

bool supports_numeric(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (float_tensors_only(graph, node)) return true;
  if (!integer_arithmetic(node.op_type) || !tensors_of(graph, node, kIntegerArithmetic)) {
    return false;
  }
  // One integer type throughout (ONNX requires it; a model that breaks it stays on the CPU,
  // whose kernel says so).
  const DType t = graph.values[node.outputs[0]].dtype;
  for (int v : node.inputs) {
    if (v >= 0 && graph.values[v].dtype != t) return false;
  }
  return true;
}

// A row that reads or writes bool (typed_on_device): one typed kernel (codegen.h's
// generate_typed), its inputs broadcast through strides and read in their stored dtypes, the
// output stored as the row's result type. The row's placeholders become generate_typed's.
Status lower_typed(Lowering& ctx, int index) {
  const ops::ElementwiseRow& row = *ops::find_elementwise(ctx.node(index).op_type);
  std::string expression(row.device);
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"{x}", "{0}"},
                                 {"{a}", "{0}"},
                                 {"{b}", "{1}"}}) {
    for (size_t at = expression.find(from); at != std::string::npos;
         at = expression.find(from, at + to.size())) {
      expression.replace(at, from.size(), to);
    }
  }
  return lower_broadcast(ctx, index, "logical", expression);
}

// An integer Add, Sub or Mul: one typed kernel (wrapping as the CPU's two's complement does).
// Float nodes of these rows are fused (is_fusible) and never reach here.
Status lower_integer(Lowering& ctx, int index) {
  const std::string_view op = ctx.node(index).op_type;
  const char* expression = op == "Add"   ? "({0} + {1})"
                           : op == "Sub" ? "({0} - {1})"
                                         : "({0} * {1})";
  return lower_broadcast(ctx, index, "integer", expression);
}

}  // namespace

std::vector<OpLowering> elementwise_lowerings() {
  std::vector<OpLowering> out;
  // CPU-only rows (no device expression) get no lowering: the engine leaves them to the CPU.
  for (const ops::ElementwiseRow& row : ops::elementwise_rows()) {
    if (!row.on_device()) continue;
    if (row.typed_on_device()) {
      out.push_back({.op = row.name,
                     .supports = &engine_tensors,
                     .lower = &lower_typed,
                     .types = kEngineTypes});
    } else if (integer_arithmetic(row.name)) {
      out.push_back({.op = row.name,
                     .supports = &supports_numeric,
                     .lower = &lower_integer,
                     .types = kFloatEngineTypes | kIntegerArithmetic});
    } else {
      out.push_back({row.name, &supports, nullptr, 0});
    }
  }
  out.push_back({"Gelu", &supports, nullptr, 0});
  return out;
}

bool is_fusible(const compiler::Graph& graph, const compiler::IrNode& node) {
  const OpLowering* l = find_lowering(node.op_type, node.domain);
  if (l == nullptr) return false;
  if (l->lower == nullptr) return true;
  // Add, Sub and Mul fuse on floats and run as typed kernels on integers.
  const DType t = graph.values[node.outputs[0]].dtype;
  return l->lower == &lower_integer &&
         (t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16);
}

namespace {

// The run's pointers if every deferred Concat it reads were read in place (one per piece), and
// the Concats lowered now instead, the one of most pieces first, while that is more than a kernel
// takes (DenseNet's last dense layers concatenate up to 25 feature maps).
Status fit_pointers(Lowering& ctx, const std::vector<int>& group, size_t stored) {
  std::set<int> produced;
  for (int idx : group) produced.insert(ctx.node(idx).outputs[0]);
  for (;;) {
    size_t pointers = stored;
    int widest = -1;
    std::set<int> seen;
    for (int idx : group) {
      for (int v : ctx.node(idx).inputs) {
        if (v < 0 || produced.count(v) || !seen.insert(v).second) continue;
        if (ctx.deferred_concat(v) >= 0) {
          const size_t pieces = ctx.node(ctx.deferred_concat(v)).inputs.size();
          pointers += pieces;
          if (widest < 0 || pieces > ctx.node(ctx.deferred_concat(widest)).inputs.size()) {
            widest = v;
          }
        } else if (!ctx.is_constant(v) || checked_numel(ctx.value(v).sizes) != 1) {
          ++pointers;  // (a one-element constant is a literal in the code)
        }
      }
    }
    if (pointers <= kMaxKernelOperands || widest < 0) return Status();
    BATON_TRY(lower_deferred_concat(ctx, widest));
  }
}

// Whether a constant operand broadcasts along some dynamic dimension of the output `out`:
// decided by the dimensions, not by this lowering's sizes. A dynamic partition is lowered at
// several sizes and split into engines at a size of 1 (builder/dynamic_shapes.cpp), and the
// engines share one copy of the weights only when their weights are the same bytes: a [1, H] row
// added to a [batch, sequence, H] tensor must be stored alike (float32) in the engine for batch 1
// and sequence 1, where it happens to be the output's size, and in the others. (BERT-base fp16
// was four copies of its weights, 873 MB against 224 MB, when this followed the sizes.)
bool broadcasts_along_a_dynamic_dimension(const Lowering& ctx, const compiler::IrValue& constant,
                                          const compiler::IrValue& out) {
  if (!compiler::is_dynamic(out) || constant.sizes.size() > out.dims.size()) return false;
  const sym::SymbolTable& symbols = ctx.graph().symbols;
  // The constant's dimensions align with the output's last ones (numpy broadcasting).
  const size_t missing = out.dims.size() - constant.sizes.size();
  for (size_t d = 0; d < out.dims.size(); ++d) {
    if (symbols.is_constant(out.dims[d])) continue;
    if (d < missing || !compiler::is_dynamic(constant) ||
        constant.dims[d - missing] != out.dims[d]) {
      return true;
    }
  }
  return false;
}

}  // namespace

Status lower_fused_group(Lowering& ctx, const std::vector<int>& group) {
  FusedKernel k;
  k.name = ctx.kernel_name("fused");
  k.sizes_vary = ctx.dynamic();
  k.sizes = ctx.value(ctx.node(group.back()).outputs[0]).sizes;
  std::set<int> in_group(group.begin(), group.end());
  // Results anything outside the group reads are stored; the rest stay in registers.
  std::vector<int> stored;
  for (int idx : group) {
    const int v = ctx.node(idx).outputs[0];
    bool needed = ctx.is_partition_output(v);
    for (int c : ctx.consumers(v)) needed = needed || (!in_group.count(c) && !ctx.absorbed(c));
    if (needed) stored.push_back(v);
  }
  BATON_TRY(fit_pointers(ctx, group, stored.size()));
  const std::vector<int64_t> logical_sizes = k.sizes;  // (k.sizes may go channels-last below)
  // A deferred Concat the run reads in place: its inputs, when its axis is one of the output's
  // dimensions as they are (no broadcast).
  auto pieces_of = [&](int v) -> const compiler::IrNode* {
    const int c = ctx.deferred_concat(v);
    return c >= 0 && ctx.value(v).sizes == logical_sizes ? &ctx.node(c) : nullptr;
  };
  // Channels-last when a full-size input is stored so (a convolution's output) and every result
  // stays inside the engine: the kernel then walks memory in N, H, W, C order.
  bool nhwc = k.sizes.size() == 4;
  for (int v : stored) nhwc = nhwc && !ctx.is_binding(v);
  bool any_nhwc = false;
  for (int idx : group) {
    for (int v : ctx.node(idx).inputs) {
      if (v >= 0 && !ctx.is_constant(v) && ctx.value(v).sizes == k.sizes && ctx.channels_last(v))
        any_nhwc = true;
      // A Concat read in place counts as channels-last when its inputs all are (as the Concat's
      // own kernel would have stored it).
      if (const compiler::IrNode* c = v >= 0 ? pieces_of(v) : nullptr) {
        bool all = true;
        for (int p : c->inputs) all = all && ctx.channels_last(p);
        any_nhwc = any_nhwc || all;
      }
    }
  }
  nhwc = nhwc && any_nhwc;
  const std::vector<int> order = nhwc ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{};
  if (nhwc) k.sizes = {k.sizes[0], k.sizes[2], k.sizes[3], k.sizes[1]};
  // Strides along the output's logical dimensions, put in the kernel's dimension order.
  auto in_kernel_order = [&](std::vector<int64_t> strides) {
    const std::vector<int64_t> logical = strides;
    for (size_t d = 0; d < order.size(); ++d) strides[d] = logical[order[d]];
    return strides;
  };
  std::map<int, int> ref;  // value -> operand reference in the kernel
  std::vector<int> operands;
  const compiler::IrValue& out = ctx.value(ctx.node(group.back()).outputs[0]);
  for (int idx : group) {
    const compiler::IrNode& n = ctx.node(idx);
    int refs[2] = {0, 0};
    for (size_t i = 0; i < n.inputs.size() && i < 2; ++i) {
      const int v = n.inputs[i];
      if (auto it = ref.find(v); it != ref.end()) {
        refs[i] = it->second;
        continue;
      }
      const compiler::IrValue& iv = ctx.value(v);
      FusedInput in;
      const compiler::IrNode* concat = pieces_of(v);
      if (ctx.deferred_concat(v) >= 0 && concat == nullptr) {
        BATON_TRY(lower_deferred_concat(ctx, v));  // broadcast into the run: not read in place
      }
      if (concat != nullptr) {
        // Each piece read where its producer wrote it, through its strides in the kernel's
        // dimension order.
        const auto axis = static_cast<size_t>(concat->attr_int("axis"));
        in.axis = static_cast<int>(axis);
        for (size_t d = 0; d < order.size(); ++d) {
          if (static_cast<size_t>(order[d]) == axis) in.axis = static_cast<int>(d);
        }
        for (int p : concat->inputs) {
          FusedPiece piece;
          piece.dtype = ctx.dtype_of(p);
          piece.size = ctx.value(p).sizes[axis];
          piece.strides = in_kernel_order(ctx.strides_of(p));
          in.pieces.push_back(std::move(piece));
          operands.push_back(p);
        }
      } else if (iv.constant && checked_numel(iv.sizes) == 1) {
        in.literal = true;
        in.value = ctx.constant_floats(v)[0];
      } else {
        // A constant the size of the output is stored like an activation; a smaller one that
        // broadcasts (a normalization's per-channel scale and shift, bn-affine's) stays float32:
        // it costs no bandwidth to speak of, and a float16 scale would add its own rounding to
        // every element.
        const auto numel = checked_numel(iv.sizes);
        const bool broadcast =
            (numel.has_value() && *numel < checked_numel(logical_sizes).value_or(0)) ||
            broadcasts_along_a_dynamic_dimension(ctx, iv, out);
        const int src = !iv.constant ? v
                        : broadcast  ? ctx.weight(v, DType::Float32)
                                     : ctx.weight(v, ctx.activation_dtype());
        in.dtype = ctx.dtype_of(src);
        // The input's strides (as stored) broadcast to the output's logical dimensions (0 along
        // broadcast dimensions), then put in the kernel's dimension order.
        in.strides =
            in_kernel_order(broadcast_strides(iv.sizes, ctx.strides_of(src), k.sizes.size()));
        operands.push_back(src);
      }
      ref[v] = static_cast<int>(k.inputs.size());
      refs[i] = ref[v];
      k.inputs.push_back(in);
    }
    ref[n.outputs[0]] = -1 - static_cast<int>(k.ops.size());
    k.ops.push_back({elementwise_expression(n), refs[0], refs[1]});
  }
  for (int v : stored) {
    if (nhwc) ctx.set_channels_last(v);
    k.outputs.push_back({ctx.dtype_of(v), -1 - ref[v]});
    operands.push_back(v);
  }
  LaunchShape launch;
  KernelArgs args = ctx.kernel_args();
  std::string code = generate_fused(k, &launch, &args);
  ctx.add_kernel(k.name, std::move(code), launch, std::move(operands), args);
  return Status();
}

}  // namespace baton::cuda
