#include "compiler/sampling.h"

#include <algorithm>
#include <string>
#include <vector>

#include "baton/core/check.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

namespace {

std::vector<uint8_t> bytes_of(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + n);
}

int float_constant(Graph& g, const std::string& name, float v) {
  return add_constant(g, name, DType::Float32, {1}, bytes_of(&v, sizeof v));
}

int int_constant(Graph& g, const std::string& name, int64_t v) {
  return add_constant(g, name, DType::Int64, {1}, bytes_of(&v, sizeof v));
}

// A new graph input of `dtype` with the sizes (and dimension expressions) of `like`'s first
// `rank` dimensions, or [1] when `rank` is 0.
int add_input(Graph& g, const std::string& name, DType dtype, int like, size_t rank) {
  IrValue v;
  v.name = name;
  v.dtype = dtype;
  v.shape_known = true;
  const IrValue& l = g.values[like];
  if (rank == 0) {
    v.sizes = {1};
  } else {
    v.sizes.assign(l.sizes.begin(), l.sizes.begin() + static_cast<std::ptrdiff_t>(rank));
    if (!l.dims.empty()) {
      v.dims.assign(l.dims.begin(), l.dims.begin() + static_cast<std::ptrdiff_t>(rank));
    }
  }
  const int id = g.add_value(std::move(v));
  g.inputs.push_back(id);
  return id;
}

// One node with one output (a new value named `out`); returns the output.
Result<int> node1(Graph& g, const std::string& op, std::vector<int> inputs, const std::string& out,
                  std::vector<std::pair<std::string, ops::AttrValue>> attrs = {}) {
  const int v = add_value(g, out);
  NewNode n;
  n.name = out;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {v};
  n.attrs = std::move(attrs);
  BATON_TRY(add_node(g, std::move(n)).status());
  return v;
}

// Top-k sampling with temperature and nucleus (top-p), by inverse transform: of each position's
// k largest logits, the softmax of logits / temperature; the smallest prefix (in descending
// order) whose probability before it is below top_p is kept; the token is the first whose kept
// cumulative probability exceeds u * (the kept mass), u the call's uniform number in [0, 1). The
// caller passes temperature, top_p and u as inputs, so one program serves every setting and a
// seeded caller gets the same tokens on every backend.
Result<int> append_top_k(Graph& g, int logits, int64_t k) {
  const int temperature = add_input(g, "sample_temperature", DType::Float32, logits, 0);
  const int top_p = add_input(g, "sample_top_p", DType::Float32, logits, 0);
  const int uniform = add_input(g, "sample_uniform", DType::Float32, logits, 2);
  const int last_axis = int_constant(g, "sample_last_axis", -1);
  const int vals = add_value(g, "sample_topk_values");
  const int idx = add_value(g, "sample_topk_indices");
  NewNode topk;
  topk.name = "sample_topk";
  topk.op_type = "TopK";
  topk.inputs = {logits, int_constant(g, "sample_k", k)};
  topk.outputs = {vals, idx};
  topk.attrs = {{"axis", ops::AttrValue::of_int(-1)},
                {"largest", ops::AttrValue::of_int(1)},
                {"sorted", ops::AttrValue::of_int(1)}};
  BATON_TRY(add_node(g, std::move(topk)).status());
  const auto axis = ops::AttrValue::of_int(-1);
  const auto keepdims = ops::AttrValue::of_int(1);
  const auto to_float = ops::AttrValue::of_int(static_cast<int64_t>(DType::Float32));
  // In float32 whatever the logits' type, less the largest before the temperature divides, so
  // that a tiny temperature cannot overflow to inf (the largest stays 0: its probability 1).
  BATON_ASSIGN_OR_RETURN(const int vals32,
                         node1(g, "Cast", {vals}, "sample_values_f", {{"to", to_float}}));
  BATON_ASSIGN_OR_RETURN(const int top, node1(g, "ReduceMax", {vals32, last_axis}, "sample_top",
                                              {{"keepdims", keepdims}}));
  BATON_ASSIGN_OR_RETURN(const int centered, node1(g, "Sub", {vals32, top}, "sample_centered"));
  BATON_ASSIGN_OR_RETURN(const int scaled,
                         node1(g, "Div", {centered, temperature}, "sample_scaled"));
  BATON_ASSIGN_OR_RETURN(const int probs,
                         node1(g, "Softmax", {scaled}, "sample_probs", {{"axis", axis}}));
  BATON_ASSIGN_OR_RETURN(const int cdf, node1(g, "CumSum", {probs, last_axis}, "sample_cdf"));
  BATON_ASSIGN_OR_RETURN(const int before, node1(g, "Sub", {cdf, probs}, "sample_before"));
  BATON_ASSIGN_OR_RETURN(const int keep, node1(g, "Less", {before, top_p}, "sample_keep"));
  const int zero = float_constant(g, "sample_zero", 0.0f);
  BATON_ASSIGN_OR_RETURN(const int kept, node1(g, "Where", {keep, probs, zero}, "sample_kept"));
  BATON_ASSIGN_OR_RETURN(const int kcdf, node1(g, "CumSum", {kept, last_axis}, "sample_kept_cdf"));
  // The kept mass as the cumulative sum's last (largest) value, so that the draw's target
  // compares with the very sums it was made from.
  BATON_ASSIGN_OR_RETURN(const int mass, node1(g, "ReduceMax", {kcdf, last_axis}, "sample_mass",
                                               {{"keepdims", keepdims}}));
  BATON_ASSIGN_OR_RETURN(const int u3,
                         node1(g, "Unsqueeze", {uniform, last_axis}, "sample_uniform_3d"));
  BATON_ASSIGN_OR_RETURN(const int target, node1(g, "Mul", {u3, mass}, "sample_target"));
  // Counts in float (exact below 2^24; reductions of floats run on every backend).
  BATON_ASSIGN_OR_RETURN(const int below, node1(g, "LessOrEqual", {kcdf, target}, "sample_below"));
  BATON_ASSIGN_OR_RETURN(const int below_f,
                         node1(g, "Cast", {below}, "sample_below_f", {{"to", to_float}}));
  BATON_ASSIGN_OR_RETURN(const int count, node1(g, "ReduceSum", {below_f, last_axis},
                                                "sample_count", {{"keepdims", keepdims}}));
  BATON_ASSIGN_OR_RETURN(const int keep_f,
                         node1(g, "Cast", {keep}, "sample_keep_f", {{"to", to_float}}));
  BATON_ASSIGN_OR_RETURN(const int kept_n, node1(g, "ReduceSum", {keep_f, last_axis},
                                                 "sample_kept_n", {{"keepdims", keepdims}}));
  // Rounding can leave u * mass at or above the last kept cumulative value: take the last kept.
  BATON_ASSIGN_OR_RETURN(
      const int last_kept,
      node1(g, "Sub", {kept_n, float_constant(g, "sample_one", 1.0f)}, "sample_last_kept"));
  // min(count, last_kept) as a select: every backend has Less and Where for floats.
  BATON_ASSIGN_OR_RETURN(const int fewer, node1(g, "Less", {count, last_kept}, "sample_fewer"));
  BATON_ASSIGN_OR_RETURN(const int pick_f,
                         node1(g, "Where", {fewer, count, last_kept}, "sample_pick_f"));
  const auto to_int = ops::AttrValue::of_int(static_cast<int64_t>(DType::Int64));
  BATON_ASSIGN_OR_RETURN(const int pick,
                         node1(g, "Cast", {pick_f}, "sample_pick", {{"to", to_int}}));
  BATON_ASSIGN_OR_RETURN(
      const int chosen, node1(g, "GatherElements", {idx, pick}, "sample_chosen", {{"axis", axis}}));
  return node1(g, "Squeeze", {chosen, last_axis}, "next_tokens");
}

}  // namespace

Status append_sampling(Graph& graph, const std::string& sample) {
  if (sample.empty()) return Status();
  int64_t k = 0;
  if (sample.rfind("top-k=", 0) == 0) {
    size_t used = 0;
    try {
      k = std::stoll(sample.substr(6), &used);
    } catch (...) {
      used = 0;
    }
    BATON_CHECK_OR_RETURN(used > 0 && 6 + used == sample.size() && k >= 1 && k <= 1024,
                          InvalidArgument,
                          "--sample {}: expected top-k=K with K from 1 to 1024 (the candidates "
                          "each token is drawn from)",
                          sample);
  }
  BATON_CHECK_OR_RETURN(sample == "greedy" || k > 0, InvalidArgument,
                        "--sample {}: expected 'greedy' or 'top-k=K'", sample);
  auto is_logits = [&](int v) {
    const IrValue& x = graph.values[v];
    return x.sizes.size() == 3 &&
           (x.dtype == DType::Float32 || x.dtype == DType::Float16 || x.dtype == DType::BFloat16);
  };
  std::string names;
  int logits = -1;
  for (int v : graph.outputs) {
    names += (names.empty() ? "'" : ", '") + graph.values[v].name + "'";
    if (graph.values[v].name == "logits") logits = v;
    BATON_CHECK_OR_RETURN(graph.values[v].name != "next_tokens", InvalidArgument,
                          "--sample adds the output 'next_tokens', which the model has already");
  }
  if (logits < 0 && graph.outputs.size() == 1 && is_logits(graph.outputs[0])) {
    logits = graph.outputs[0];
  }
  BATON_CHECK_OR_RETURN(logits >= 0 && is_logits(logits), InvalidArgument,
                        "--sample {} chooses tokens from the logits [batch, new_tokens, "
                        "vocab], a float output named 'logits' (or the only output); the model's "
                        "outputs are {}",
                        sample, names);
  if (k > 0) {
    BATON_CHECK_OR_RETURN(graph.opset >= 13, InvalidArgument,
                          "--sample {} needs a model of opset 13 or later (it has {}): export it "
                          "at a newer opset",
                          sample, graph.opset);
    const int64_t vocab = graph.values[logits].sizes[2];
    BATON_CHECK_OR_RETURN(k <= vocab, InvalidArgument,
                          "--sample top-k={}: the vocabulary has only {} tokens", k, vocab);
    for (const char* name : {"sample_temperature", "sample_top_p", "sample_uniform"}) {
      for (int v : graph.inputs) {
        BATON_CHECK_OR_RETURN(graph.values[v].name != name, InvalidArgument,
                              "--sample {} adds the input '{}', which the model has already",
                              sample, name);
      }
    }
  }
  BATON_ASSIGN_OR_RETURN(const int next, k > 0 ? append_top_k(graph, logits, k)
                                               : node1(graph, "ArgMax", {logits}, "next_tokens",
                                                       {{"axis", ops::AttrValue::of_int(-1)},
                                                        {"keepdims", ops::AttrValue::of_int(0)}}));
  std::replace(graph.outputs.begin(), graph.outputs.end(), logits, next);
  return Status();
}

}  // namespace baton::compiler
