// Sampling inside the program (CompileOptions::sample, docs/generate.md): a decoder's logits
// output [batch, new_tokens, vocab] becomes `next_tokens` [batch, new_tokens] int64, the index of
// each position's largest logit (an ArgMax node appended to the graph, so it runs where the
// logits are computed, on the GPU for a GPU program). A generation loop then reads one int64 per
// token instead of the vocabulary's logits, and the host does no argmax.
#pragma once

#include <string>

#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

// `sample` "" does nothing; "greedy" replaces the output named "logits" (or else the only output,
// when it is a float tensor of rank 3) by next_tokens. InvalidArgument naming the outputs when no
// output is the logits, or when "next_tokens" is taken.
Status append_sampling(Graph& graph, const std::string& sample);

}  // namespace baton::compiler
