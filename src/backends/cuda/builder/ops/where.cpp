// Where on the GPU: a typed kernel (codegen.h's generate_typed) selecting between X and Y of any
// stored dtype, all three inputs broadcast to the output through strides. The values move in
// their stored dtypes (ld / sto, device/typed.cuh): integers exactly, floats in float.
#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  k.expression = "({0} ? {1} : {2})";
  std::vector<int> operands;
  for (int v : n.inputs) {
    TypedOperand t = typed_operand(ctx, v, k.sizes);
    k.inputs.push_back(t.input);
    operands.push_back(t.operand);
  }
  operands.push_back(out);
  add_typed_kernel(ctx, "where", std::move(k), std::move(operands));
  return Status();
}

}  // namespace

const OpLowering kWhereLowering{"Where", &engine_tensors, &lower};

}  // namespace baton::cuda
