#include "compiler/sampling.h"

#include <algorithm>

#include "baton/core/check.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

Status append_sampling(Graph& graph, const std::string& sample) {
  if (sample.empty()) return Status();
  BATON_CHECK_OR_RETURN(sample == "greedy", InvalidArgument,
                        "--sample {}: expected 'greedy'", sample);
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
                          "--sample greedy adds the output 'next_tokens', which the model has "
                          "already");
  }
  if (logits < 0 && graph.outputs.size() == 1 && is_logits(graph.outputs[0])) {
    logits = graph.outputs[0];
  }
  BATON_CHECK_OR_RETURN(logits >= 0 && is_logits(logits), InvalidArgument,
                        "--sample greedy chooses tokens from the logits [batch, new_tokens, "
                        "vocab], a float output named 'logits' (or the only output); the model's "
                        "outputs are {}",
                        names);
  const int next = add_value(graph, "next_tokens");
  NewNode argmax;
  argmax.name = "sample_greedy";
  argmax.op_type = "ArgMax";
  argmax.inputs = {logits};
  argmax.outputs = {next};
  argmax.attrs = {{"axis", ops::AttrValue::of_int(-1)}, {"keepdims", ops::AttrValue::of_int(0)}};
  BATON_TRY(add_node(graph, std::move(argmax)).status());
  std::replace(graph.outputs.begin(), graph.outputs.end(), logits, next);
  return Status();
}

}  // namespace baton::compiler
