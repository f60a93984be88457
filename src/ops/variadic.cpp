// ONNX Max, Min, Mean and Sum (opset 8: one or more inputs, broadcast multidirectionally; 12
// added the integer types to Max and Min, 13 bfloat16, which Baton takes from 8 on).
#include "baton/core/check.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  std::vector<int64_t> sizes(ctx.sizes(0).begin(), ctx.sizes(0).end());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    BATON_ASSIGN_OR_RETURN(sizes, broadcast_shape(sizes, ctx.sizes(i), ctx.what()));
  }
  ctx.output(0).sizes = std::move(sizes);
  return Status();
}

}  // namespace

void register_variadic(OpRegistry& registry) {
  struct Variadic {
    std::string_view name, output;
    DTypeSet types;
  };
  for (const Variadic& v :
       {Variadic{"Max", "max", kNumericTypes}, Variadic{"Min", "min", kNumericTypes},
        Variadic{"Mean", "mean", kFloatTypes}, Variadic{"Sum", "sum", kFloatTypes}}) {
    OpDef def;
    def.name = v.name;
    def.since_version = 8;
    def.inputs = {{"data_0", "T", Arity::Variadic}};
    def.outputs = {{v.output, "T"}};
    def.types = {{"T", v.types}};
    def.infer = &infer;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
