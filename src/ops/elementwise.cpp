// Definitions of the elementwise operators of ops/elementwise.h: one per row.
#include "ops/elementwise.h"

#include "baton/core/check.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer_unary(InferContext& ctx) {
  ctx.set_output_like(0, 0);
  return Status();
}

Status infer_binary(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(ctx.output(0).sizes,
                         broadcast_shape(ctx.sizes(0), ctx.sizes(1), ctx.what()));
  return Status();
}

#define BATON_UNARY_ROW(Name, since, types, cpu, device) {#Name, 1, types, DTypeSet{}, device},
#define BATON_BINARY_ROW(Name, since, a_types, b_types, cpu, device) \
  {#Name, 2, a_types, b_types, device},
constexpr ElementwiseRow kRows[] = {BATON_UNARY_OPS(BATON_UNARY_ROW)
                                        BATON_BINARY_OPS(BATON_BINARY_ROW)};
#undef BATON_UNARY_ROW
#undef BATON_BINARY_ROW

// since_version per row, in kRows order.
#define BATON_SINCE(Name, since, ...) since,
constexpr int kSince[] = {BATON_UNARY_OPS(BATON_SINCE) BATON_BINARY_OPS(BATON_SINCE)};
#undef BATON_SINCE

}  // namespace

std::span<const ElementwiseRow> elementwise_rows() { return kRows; }

const ElementwiseRow* find_elementwise(std::string_view name) {
  for (const ElementwiseRow& r : kRows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

void register_elementwise(OpRegistry& registry) {
  for (size_t k = 0; k < std::size(kRows); ++k) {
    const ElementwiseRow& row = kRows[k];
    OpDef def;
    def.name = row.name;
    def.since_version = kSince[k];
    if (row.arity == 1) {
      def.inputs = {{"X", "T"}};
      def.outputs = {{"Y", "T"}};
      def.types = {{"T", row.types}};
      def.infer = &infer_unary;
    } else {
      const bool same = row.b_types == kSameAsA;
      def.inputs = {{"A", "T"}, {"B", same ? "T" : "T1"}};
      def.outputs = {{"C", "T"}};
      def.types = {{"T", row.types}};
      if (!same) def.types.push_back({"T1", row.b_types});
      def.infer = &infer_binary;
    }
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
