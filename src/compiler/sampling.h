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
// when it is a float tensor of rank 3) by next_tokens. "top-k=K" does too, drawing each token
// from the K most likely by inverse transform: the softmax of their logits / sample_temperature,
// cut to the smallest prefix whose probability before it is below sample_top_p, and the first
// token whose kept cumulative probability exceeds sample_uniform times the kept mass; those three
// become inputs ([1], [1] and [batch, new_tokens] float32) that the caller sets per call (a
// seeded caller gets the same tokens on every backend). InvalidArgument naming the outputs when no
// output is the logits, when a name it adds is taken, or K is out of range.
Status append_sampling(Graph& graph, const std::string& sample);

}  // namespace baton::compiler
