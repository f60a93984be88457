#include "compiler/passes.h"

#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "baton/core/log.h"
#include "compiler/shape_infer.h"
#include "compiler/shape_values.h"
#include "ops/einsum.h"
#include "runtime/kernel.h"

namespace baton::compiler {
namespace {

runtime::Value tensor_value(const IrValue& v) {
  TensorView view;
  view.data = v.constant ? const_cast<uint8_t*>(v.constant->data()) : nullptr;
  view.dtype = v.dtype;
  view.sizes = v.sizes;
  view.device = Device::cpu();
  return runtime::Value::from_tensor(view);
}

// Runs the node's CPU kernel on its constant inputs; the results become constants.
Status fold(Graph& graph, IrNode& node, const runtime::KernelDef& kernel) {
  std::vector<runtime::Value> inputs, attrs, outputs;
  for (int id : node.inputs) {
    inputs.push_back(id < 0 ? runtime::Value::none() : tensor_value(graph.values[id]));
  }
  for (const ops::AttrValue& a : node.attrs) attrs.push_back(runtime::attr_as_value(a));
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers;
  for (int o : node.outputs) {
    IrValue& out = graph.values[o];
    BATON_ASSIGN_OR_RETURN(
        std::vector<uint8_t> bytes,
        allocate_bytes(*checked_nbytes(out.dtype, out.sizes),
                       fmt::format("folding {} (output '{}')", node.describe(), out.name)));
    buffers.push_back(std::make_shared<std::vector<uint8_t>>(std::move(bytes)));
    outputs.push_back(runtime::Value::from_tensor(
        TensorView{buffers.back()->data(), out.dtype, out.sizes, Device::cpu()}));
  }
  std::vector<runtime::Value*> in_ptrs, attr_ptrs, out_ptrs;
  for (auto& v : inputs) in_ptrs.push_back(&v);
  for (auto& v : attrs) attr_ptrs.push_back(&v);
  for (auto& v : outputs) out_ptrs.push_back(&v);
  runtime::ScratchPlan scratch;
  runtime::KernelCall call{node.def, in_ptrs, attr_ptrs, out_ptrs, node.name};
  call.scratch = &scratch;
  scratch.begin_kernel(node.describe());
  BATON_ASSIGN_OR_RETURN(auto k, kernel.create(call));
  BATON_TRY(scratch.allocate());
  BATON_TRY(k->run());
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    IrValue& out = graph.values[node.outputs[o]];
    out.constant = std::move(buffers[o]);
    out.producer = -1;
  }
  node.dead = true;
  return Status();
}

// Shape and Size read nothing but their input's static shape, so they fold whether or not the
// input is a constant (and what is computed from them folds in turn). Of a dynamic input, only a
// Shape whose selected dimensions are all static folds; the others run at run time.
bool folds_from_static_shape(const Graph& graph, const IrNode& node) {
  if (!node.domain.empty() || (node.op_type != "Shape" && node.op_type != "Size")) return false;
  const IrValue& in = graph.values[node.inputs[0]];
  if (!is_dynamic(in)) return true;
  if (node.op_type == "Size") return false;
  // Canonical after inference (Shape-15): start and end in [0, rank], end present.
  const bool ranged = node.def->attr_index("start") >= 0;
  const int64_t start = ranged ? node.attr_int("start") : 0;
  const int64_t end = ranged ? node.attr_int("end") : static_cast<int64_t>(in.dims.size());
  for (int64_t d = start; d < end; ++d) {
    if (!graph.symbols.is_constant(in.dims[d])) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<ops::InputInfo>> input_infos(const Graph& graph, const IrNode& node) {
  std::vector<ops::InputInfo> inputs;
  for (int id : node.inputs) {
    ops::InputInfo info;
    if (id < 0) {
      info.present = false;
    } else {
      const IrValue& v = graph.values[id];
      BATON_CHECK_OR_RETURN(v.shape_known, Internal, "{}: input '{}' has no shape yet",
                            node.describe(), v.name);
      info.dtype = v.dtype;
      info.sizes = v.sizes;
      info.data = v.constant ? v.constant->data() : nullptr;
    }
    inputs.push_back(info);
  }
  return inputs;
}

double fold_work(const Graph& graph, const IrNode& node) {
  auto numel = [&](int id) {
    double n = 1;
    for (int64_t d : graph.values[id].sizes) n *= static_cast<double>(d);
    return n;
  };
  auto input = [&](size_t i) -> const IrValue* {
    return i < node.inputs.size() && node.inputs[i] >= 0 ? &graph.values[node.inputs[i]] : nullptr;
  };
  double out = 0;
  for (int o : node.outputs) out += numel(o);
  const std::string& op = node.op_type;
  if ((op == "MatMul" || op == "Gemm" || op == "Linear") && input(0) != nullptr &&
      !input(0)->sizes.empty()) {
    // Every output element is a dot product along A's last axis (Gemm's transA is its first).
    const std::vector<int64_t>& a = input(0)->sizes;
    const bool trans_a = op == "Gemm" && node.def != nullptr && node.attr_int("transA") != 0;
    const int64_t k = trans_a ? a.front() : a.back();
    return out * static_cast<double>(std::max<int64_t>(k, 1));
  }
  if (op == "Conv" && input(1) != nullptr && input(1)->sizes.size() > 1) {
    // Each output element reads C/group x kernel volume weights: W is [M, C/group, k...].
    double per = 1;
    for (size_t d = 1; d < input(1)->sizes.size(); ++d) {
      per *= static_cast<double>(input(1)->sizes[d]);
    }
    return out * std::max(per, 1.0);
  }
  if (op == "Attention" && input(0) != nullptr && input(2) != nullptr &&
      input(0)->sizes.size() >= 2 && input(2)->sizes.size() >= 2) {
    // Q K^T and P V: each of the Sq x Sk scores costs d + dv.
    const std::vector<int64_t>& q = input(0)->sizes;
    const std::vector<int64_t>& v = input(2)->sizes;
    double scores = 1;
    for (size_t d = 0; d + 1 < q.size(); ++d) scores *= static_cast<double>(q[d]);
    scores *= static_cast<double>(v[v.size() - 2]);
    return scores * static_cast<double>(q.back() + v.back());
  }
  double in = 0;
  std::vector<std::span<const int64_t>> shapes;
  for (int id : node.inputs) {
    if (id < 0) continue;
    in += numel(id);
    shapes.push_back(graph.values[id].sizes);
  }
  if (op == "Einsum" && node.def != nullptr) {
    auto plan = ops::plan_einsum(node.attr_string("equation"), shapes, node.describe());
    if (plan.ok()) return ops::plan_contraction(*plan, shapes).work;
  }
  return in + out;
}

// Whether each of `node`'s If conditions (IrNode::guards) has the value that keeps it. A condition
// must be a constant by the time its branch is reached: folded from initializers, Constant nodes
// or shape arithmetic over static sizes. Anything else is an error naming the If.
static Result<bool> guards_hold(const Graph& graph, const IrNode& node) {
  for (const IrNode::Guard& g : node.guards) {
    const IrValue& c = graph.values[g.cond];
    BATON_CHECK_OR_RETURN(
        c.constant != nullptr, NotSupported,
        "If node '{}': its condition '{}' is not known at compile time (it depends on an input's "
        "values or on a dynamic size); Baton compiles an If only when its condition folds, as "
        "one of its branches. Fix the shapes it depends on (--shape), or export the model with "
        "the branch resolved",
        g.if_node, c.name);
    BATON_CHECK_OR_RETURN(c.dtype == DType::Bool && c.constant->size() == 1, InvalidArgument,
                          "If node '{}': its condition '{}' is {} {}, not one bool", g.if_node,
                          c.name, dtype_name(c.dtype), shape_to_string(c.sizes));
    const bool value = *static_cast<const uint8_t*>(c.constant->data()) != 0;
    if (value != g.when) return false;
  }
  return true;
}

Result<FoldReport> infer_and_fold(Graph& graph, const FoldLimits& limits) {
  FoldReport report;
  uint64_t total = 0;
  std::vector<std::string> unsupported;
  for (IrNode& node : graph.nodes) {
    if (node.dead) continue;
    // A node of an If's branch (onnx_import.cpp): kept if its conditions, all known by now, say
    // so; otherwise dropped before its shapes are inferred.
    BATON_ASSIGN_OR_RETURN(const bool kept, guards_hold(graph, node));
    if (!kept) {
      node.dead = true;
      continue;
    }
    // Both branches' last Identity nodes write the If's output: it is the kept one's now.
    if (!node.guards.empty()) {
      for (int o : node.outputs) {
        if (o >= 0) graph.values[o].producer = static_cast<int>(&node - graph.nodes.data());
      }
    }
    BATON_CHECK_OR_RETURN(node.unsupported.empty(), NotSupported,
                          "'{}' uses an unsupported node in the branch its If keeps: {}",
                          graph.source, node.unsupported);
    BATON_CHECK_OR_RETURN(node.def != nullptr, Internal, "{} reached inference unbound",
                          node.describe());
    const runtime::KernelDef* kernel = runtime::kernel_registry().find(node.op_type, node.domain);
    BATON_CHECK_OR_RETURN(kernel != nullptr, Internal, "{} has no CPU kernel after import",
                          node.describe());
    BATON_ASSIGN_OR_RETURN(const std::vector<ops::InputInfo> inputs, input_infos(graph, node));
    std::vector<DType> in_types, out_types;
    bool all_constant = true;
    for (int id : node.inputs) {
      if (id < 0) continue;
      in_types.push_back(graph.values[id].dtype);
      // Not info.data: an empty constant's data pointer may be null.
      all_constant = all_constant && graph.values[id].constant != nullptr;
    }
    BATON_CHECK_OR_RETURN(
        std::all_of(node.outputs.begin(), node.outputs.end(), [](int o) { return o >= 0; }),
        NotSupported, "{}: optional outputs left unnamed are not supported", node.describe());
    BATON_ASSIGN_OR_RETURN(NodeShapes shapes, infer_node_shapes(graph, node));
    set_output_shapes(graph, node, std::move(shapes));
    for (int o : node.outputs) out_types.push_back(graph.values[o].dtype);
    std::string why;
    if (!runtime::kernel_takes(*kernel, *node.def, in_types, out_types, &why)) {
      unsupported.push_back(fmt::format("{}: {}", node.describe(), why));
      continue;
    }
    // Shape arithmetic over dynamic sizes is followed as expressions (compiler/shape_values.h).
    const bool shape_arithmetic =
        !all_constant && !node.inputs.empty() &&
        (std::any_of(node.inputs.begin(), node.inputs.end(),
                     [&](int id) { return id >= 0 && !graph.values[id].sym_values.empty(); }) ||
         (node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size") &&
          is_dynamic(graph.values[node.inputs[0]])));
    if (shape_arithmetic) {
      BATON_ASSIGN_OR_RETURN(const ShapeValues followed, propagate_shape_values(graph, node));
      if (followed == ShapeValues::Constant) ++report.folded;
      if (followed != ShapeValues::None) continue;
    }
    if (!(all_constant || folds_from_static_shape(graph, node)) || node.inputs.empty()) continue;
    // What folding would materialize, checked before anything is allocated: a few bytes of model
    // can ask for terabytes (a broadcast of two constant vectors). Over a limit the node keeps
    // running at run time, where the arena limit of memory planning applies to it.
    uint64_t bytes = 0;
    for (int o : node.outputs) {
      const IrValue& out = graph.values[o];
      if (__builtin_add_overflow(bytes, *checked_nbytes(out.dtype, out.sizes), &bytes)) {
        bytes = UINT64_MAX;
      }
    }
    if (bytes > limits.max_node_bytes || bytes > limits.max_total_bytes - total) {
      report.kept.push_back(fmt::format("{} ({} bytes)", node.describe(), bytes));
      if (log_enabled(LogLevel::Info)) {
        log_message(LogLevel::Info, "compiler",
                    fmt::format("not folding {}: its outputs would take {} bytes, over the {} "
                                "(--max-fold-bytes {}, --max-total-fold-bytes {}); it runs at run "
                                "time instead",
                                node.describe(), bytes,
                                bytes > limits.max_node_bytes ? "limit for one node"
                                                              : "limit for all folded outputs",
                                limits.max_node_bytes, limits.max_total_bytes));
      }
      continue;
    }
    // What folding would compute, estimated before it runs: a 1 KB model can ask for 1e14
    // multiply-adds (an Einsum or a MatMul of broadcast constants). Over the budget the node runs
    // at run time, where the user decides whether to wait for it.
    const double work = fold_work(graph, node);
    if (!(work <= limits.max_node_work)) {
      report.kept.push_back(fmt::format("{} ({:.3g} operations)", node.describe(), work));
      if (log_enabled(LogLevel::Info)) {
        log_message(LogLevel::Info, "compiler",
                    fmt::format("not folding {}: computing it would take about {:.3g} operations, "
                                "over --max-fold-work {:.3g}; it runs at run time instead",
                                node.describe(), work, limits.max_node_work));
      }
      continue;
    }
    BATON_TRY(fold(graph, node, *kernel));
    total += bytes;
    ++report.folded;
  }
  if (!unsupported.empty()) {
    std::string message =
        fmt::format("'{}' has {} node{} with element types Baton does not run:", graph.source,
                    unsupported.size(), unsupported.size() == 1 ? "" : "s");
    for (const std::string& u : unsupported) message += "\n  " + u;
    return BATON_ERROR(NotSupported, "{}", message);
  }
  return report;
}

size_t eliminate_dead_nodes(Graph& graph) {
  std::vector<uint8_t> used(graph.values.size(), 0);
  for (int o : graph.outputs) used[o] = 1;
  // A data-dependent size (NonZero's count) is given by the kernel that writes its source value,
  // so that kernel stays even when nothing reads its output: the program must be able to bind
  // every symbol it has.
  for (size_t s = 0; s < graph.symbols.num_symbols(); ++s) {
    if (graph.symbols.symbol(s).source >= 0) used[graph.symbols.symbol(s).source] = 1;
  }
  size_t removed = 0;
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    IrNode& node = graph.nodes[n];
    if (node.dead) continue;
    const bool live = std::any_of(node.outputs.begin(), node.outputs.end(),
                                  [&](int o) { return o >= 0 && used[o]; });
    if (!live) {
      node.dead = true;
      ++removed;
      continue;
    }
    for (int i : node.inputs) {
      if (i >= 0) used[i] = 1;
    }
    // Before inference resolves them (onnx_import.cpp's trip count of a Loop), a guarded node
    // needs its conditions; after, they are folded constants with no live producer.
    for (const IrNode::Guard& g : node.guards) {
      if (g.cond >= 0) used[g.cond] = 1;
    }
  }
  return removed;
}

}  // namespace baton::compiler
