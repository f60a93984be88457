// Where on the GPU: a typed kernel (codegen.h's generate_typed) selecting between X and Y of any
// stored dtype, all three inputs broadcast to the output through strides. The values move in
// their stored dtypes (ld / sto, device/typed.cuh): integers exactly, floats in float.
#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

Status lower(Lowering& ctx, int index) {
  return lower_broadcast(ctx, index, "where", "({0} ? {1} : {2})");
}

}  // namespace

const OpLowering kWhereLowering{
    .op = "Where", .supports = &engine_tensors, .lower = &lower, .types = kEngineTypes};

}  // namespace baton::cuda
