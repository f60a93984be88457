// Small hand-built programs shared by format and runtime tests.
#pragma once

#include "testing/program_builder.h"

namespace baton::testing {

// forward(x: float32[2, 3]) -> relu(x + w), w a constant; also a test_elementwise delegate that
// multiplies by another constant when `with_delegate`:
//   y = x + w; z = relu(y); [out = z * k (delegate)]
struct AddReluProgram {
  ProgramBuilder builder;
  int x, w, y, z, out;
  std::vector<float> w_values;
  std::vector<float> k_values;
};

AddReluProgram make_add_relu_program(bool with_delegate);

// Reference result of that program for input x.
std::vector<float> add_relu_reference(const AddReluProgram& p, const std::vector<float>& x);

}  // namespace baton::testing
