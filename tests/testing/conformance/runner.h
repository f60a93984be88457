// Runs conformance cases (cases.h): builds the one-node ONNX model of a case in a dtype, compiles
// it for a device and precision, runs it, and compares with the CPU kernel's float64 result on
// the same input values.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/tensor.h"
#include "testing/conformance/cases.h"

namespace baton::testing {

// The dtypes a case runs in: its own list, or every dtype of T the definition allows and the
// CPU kernel takes.
std::vector<DType> case_dtypes(const Case& c);

// A case's model and inputs in dtype `t` (the case's T). Input values are a deterministic
// function of the case, so every dtype sees the same values where it can represent them.
struct CaseModel {
  std::vector<uint8_t> onnx;
  std::vector<Tensor> inputs;  // graph inputs, in order
};
CaseModel build_case(const Case& c, DType t);

struct CaseOutcome {
  Status status;                // compile, load or run failure
  std::vector<Tensor> outputs;  // host tensors
  compiler::CompileSummary summary;
};

// Compiles `model` with `backend` (null: the CPU) and runs it on its inputs.
CaseOutcome run_case(const CaseModel& model, compiler::BackendCompiler* backend);

// The reference: the case's inputs (as the dtype run sees them) in float64 through the CPU kernel.
CaseOutcome run_reference(const Case& c, DType t);

// ‖out − ref‖ / ‖ref‖ in double (outputs of any float or integer dtype; integer outputs are
// compared exactly after truncating the reference, so any difference gives infinity).
double normalized_error(const Tensor& out, const Tensor& ref);

// The error bound of a run whose tensors are `t`, on an engine of `precision` ("" for the CPU).
double error_bound(DType t, const std::string& precision);

}  // namespace baton::testing
