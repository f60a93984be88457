// A dynamic method's size expressions (format version 4, docs/format.md): evaluation of the flat
// list Method.size_exprs, shared by the verifier (which evaluates it with every symbol at its
// maximum and checks the tensors' recorded sizes against it) and the runtime (which evaluates it
// once per call from the symbols its inputs bind).
//
// The list is in dependency order (operands before the expressions that read them), so one pass
// computes every value; it allocates nothing. Arithmetic is checked: an overflow, a division by a
// non-positive value or a symbol number out of range is an error, never a wrapped value.
#pragma once

#include <cstdint>
#include <span>

#include "baton/core/error.h"

namespace baton::fb {
struct Method;
}

namespace baton::format {

// Writes the value of expression i to out[i] (out.size() >= the method's expression count),
// with symbol s set to symbols[s]. The structure must have passed the verifier (operands earlier
// in the list, operand counts right).
Status evaluate_size_exprs(const fb::Method& method, std::span<const int64_t> symbols,
                           std::span<int64_t> out);

}  // namespace baton::format
