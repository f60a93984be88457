// The bool-valued ops on the GPU: IsNaN, Not, And, Or, Xor and the comparisons (Equal, Less,
// LessOrEqual, Greater, GreaterOrEqual). The fused elementwise kernels compute in float and
// store float types, so these get typed kernels of their own (codegen.h's generate_typed):
// inputs broadcast through strides, read in their stored dtypes (integers compare exactly), the
// output stored as bool.
#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"

namespace baton::cuda {
namespace {

struct LogicalOp {
  std::string_view op;
  const char* expression;
};

constexpr LogicalOp kOps[] = {
    {"IsNaN", "({0} != {0})"},  {"Not", "(!{0})"},
    {"And", "({0} && {1})"},    {"Or", "({0} || {1})"},
    {"Xor", "({0} != {1})"},    {"Equal", "({0} == {1})"},
    {"Less", "({0} < {1})"},    {"LessOrEqual", "({0} <= {1})"},
    {"Greater", "({0} > {1})"}, {"GreaterOrEqual", "({0} >= {1})"},
};

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  for (const LogicalOp& op : kOps) {
    if (op.op == n.op_type) return lower_broadcast(ctx, index, "logical", op.expression);
  }
  return BATON_ERROR(Internal, "{} reached the logical lowering, which has no expression for it",
                     n.describe());
}

}  // namespace

std::vector<OpLowering> logical_lowerings() {
  std::vector<OpLowering> out;
  for (const LogicalOp& op : kOps) out.push_back({op.op, &engine_tensors, &lower});
  return out;
}

}  // namespace baton::cuda
