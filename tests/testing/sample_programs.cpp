#include "testing/sample_programs.h"

#include "testing/test_backend.h"

namespace baton::testing {

AddReluProgram make_add_relu_program(bool with_delegate) {
  AddReluProgram p;
  ProgramBuilder& b = p.builder;
  p.w_values = {0.5f, -1.0f, 2.0f, -0.25f, 0.0f, 1.5f};
  p.k_values = {2.0f, 3.0f, -1.0f, 0.5f, 4.0f, -2.0f};
  p.x = b.tensor("x", DType::Float32, {2, 3});
  p.w = b.constant_floats("w", {2, 3}, p.w_values);
  p.y = b.tensor("y", DType::Float32, {2, 3});
  p.z = b.tensor("z", DType::Float32, {2, 3});
  const int add = b.op("Add", 14);
  const int relu = b.op("Relu", 14);
  b.kernel(add, {p.x, p.w}, {}, {p.y}, "add");
  b.kernel(relu, {p.y}, {}, {p.z}, "relu");
  p.out = p.z;
  if (with_delegate) {
    p.out = b.tensor("out", DType::Float32, {2, 3});
    const auto blob = make_test_blob(1, 1, {p.k_values}, 0, {{TestOp::Mul, 0, 1, 2}}, 6);
    const int d =
        b.delegate(kTestBackendId, {{"target_device", "cpu"}, {"flavor", "mul"}}, blob, "test_0");
    b.delegate_call(d, {p.z}, {p.out});
  }
  b.inputs({p.x});
  b.outputs({p.out});
  return p;
}

std::vector<float> add_relu_reference(const AddReluProgram& p, const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = x[i] + p.w_values[i];
    out[i] = y > 0.0f ? y : 0.0f;
    if (p.out != p.z) out[i] *= p.k_values[i];
  }
  return out;
}

}  // namespace baton::testing
