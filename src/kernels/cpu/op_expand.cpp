// ONNX Expand (opset 13): the input broadcast to the output's shape, a strided copy
// (strided_copy.h) with stride 0 along the broadcast dimensions. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const std::span<const int64_t> in = call.input(0).sizes;
  const std::span<const int64_t> out = call.output(0).sizes;
  const std::vector<int64_t> in_strides = element_strides(in);
  // Dimensions aligned right; a missing or size-1 input dimension repeats.
  const size_t lead = out.size() - in.size();
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t j = 0; j < in.size(); ++j) strides[lead + j] = in[j] == 1 ? 0 : in_strides[j];
  return create_strided_copy(call, out, strides, 0);
}

}  // namespace

void register_expand(runtime::KernelRegistry& registry) {
  registry.add({"Expand", "", {}, &create});
}

}  // namespace baton::kernels::cpu
