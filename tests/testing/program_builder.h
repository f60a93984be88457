// Builds program files by hand (no compiler), for format and runtime tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "format/program_file.h"

namespace baton::testing {

class ProgramBuilder {
 public:
  ProgramBuilder();

  // A tensor in the arena of its device (bump-allocated, 64-byte aligned).
  int tensor(const std::string& name, DType dtype, std::vector<int64_t> sizes,
             Device device = Device::cpu());
  // A tensor with no storage.
  int unplanned_tensor(const std::string& name, DType dtype, std::vector<int64_t> sizes,
                       Device device = Device::cpu());
  // A constant tensor; `bytes` must match dtype x sizes.
  int constant(const std::string& name, DType dtype, std::vector<int64_t> sizes,
               std::vector<uint8_t> bytes);
  int constant_floats(const std::string& name, std::vector<int64_t> sizes,
                      const std::vector<float>& values);
  int constant_int64s(const std::string& name, std::vector<int64_t> sizes,
                      const std::vector<int64_t>& values);
  int int_value(int64_t v);
  int float_value(double v);
  int string_value(const std::string& v);
  int ints_value(std::vector<int64_t> v);
  int null_value();

  int op(const std::string& name, int opset = 17);
  void kernel(int op, std::vector<int> inputs, std::vector<int> attrs, std::vector<int> outputs,
              const std::string& node = "");
  int delegate(const std::string& backend, std::vector<std::pair<std::string, std::string>> specs,
               std::vector<uint8_t> blob, const std::string& name = "part",
               Device device = Device::cpu());
  void delegate_call(int delegate, std::vector<int> inputs, std::vector<int> outputs);
  void copy(int src, int dst);

  void inputs(std::vector<int> v) { method().inputs = std::move(v); }
  void outputs(std::vector<int> v) { method().outputs = std::move(v); }

  fb::MethodT& method() { return *program_.methods[0]; }
  fb::TensorT& tensor_at(int value) { return *method().values[value]->value.AsTensor(); }

  // Serializes a copy; the builder stays usable (tests mutate and serialize again).
  std::vector<uint8_t> bytes() const;

 private:
  int add(fb::ValueKindUnion value);
  int arena_for(Device device);
  mutable fb::ProgramT program_;  // serialization fills in its version and segment table
  std::vector<std::vector<uint8_t>> segments_;
  std::vector<uint8_t> constants_;
  int constant_segment_ = -1;
};

}  // namespace baton::testing
