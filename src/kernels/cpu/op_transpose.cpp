// ONNX Transpose (opset 13): output dimension i is input dimension perm[i] (the canonical perm is
// always present). Any dtype: a strided copy (strided_copy.h) through the permuted strides.
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const std::span<const int64_t> perm = call.attr_ints("perm");  // canonical: always present
  const std::vector<int64_t> strides = element_strides(call.input(0).sizes);
  // Output dimension i is input dimension perm[i]: the input's stride along it.
  std::vector<int64_t> permuted(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) permuted[i] = strides[perm[i]];
  return create_strided_copy(call, call.output(0).sizes, permuted, 0);
}

}  // namespace

void register_transpose(runtime::KernelRegistry& registry) {
  registry.add({"Transpose", "", {}, &create});
}

}  // namespace baton::kernels::cpu
