// ONNX MatMul (opset 13): numpy.matmul. A 1-D A is a row vector and a 1-D B a column vector (the
// added dimension is dropped from the result); leading (batch) dimensions broadcast.
#include "ops/matmul.h"

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {

MatMulShape matmul_shape(std::span<const int64_t> a, std::span<const int64_t> b) {
  MatMulShape s;
  s.k = a.back();
  if (a.size() >= 2) {
    s.m = a[a.size() - 2];
    s.a_batch = a.first(a.size() - 2);
  }
  if (b.size() >= 2) {
    s.kb = b[b.size() - 2];
    s.n = b.back();
    s.b_batch = b.first(b.size() - 2);
  } else {
    s.kb = b[0];
  }
  return s;
}

namespace {

Status infer(InferContext& ctx) {
  const auto a = ctx.sizes(0), b = ctx.sizes(1);
  BATON_CHECK_OR_RETURN(!a.empty() && !b.empty(), InvalidArgument,
                        "{}: operands must have rank >= 1, got A {} and B {}", ctx.what(),
                        shape_to_string(a), shape_to_string(b));
  const MatMulShape s = matmul_shape(a, b);
  BATON_CHECK_OR_RETURN(s.k == s.kb, InvalidArgument,
                        "{}: inner dimensions differ: A {} has K={}, B {} has K={}", ctx.what(),
                        shape_to_string(a), s.k, shape_to_string(b), s.kb);
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                         broadcast_shape(s.a_batch, s.b_batch, ctx.what() + " (batch dimensions)"));
  if (a.size() >= 2) sizes.push_back(s.m);
  if (b.size() >= 2) sizes.push_back(s.n);
  ctx.output(0).sizes = std::move(sizes);
  return Status();
}

}  // namespace

void register_matmul(OpRegistry& registry) {
  OpDef def;
  def.name = "MatMul";
  def.since_version = 13;
  def.inputs = {{"A", "T"}, {"B", "T"}};
  def.outputs = {{"Y", "T"}};
  def.types = {{"T", kFloatTypes | kIndexTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
