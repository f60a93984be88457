// ONNX Tile (opset 13): output dimension d, of size repeats[d] * size[d], seen as two dimensions
// [repeats[d], size[d]] with stride 0 along the first: a strided copy (strided_copy.h) of twice
// the rank. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const std::span<const int64_t> in = call.input(0).sizes;
  const std::span<const int64_t> out = call.output(0).sizes;
  const std::vector<int64_t> in_strides = element_strides(in);
  std::vector<int64_t> view, strides;
  for (size_t d = 0; d < in.size(); ++d) {
    view.push_back(in[d] == 0 ? 0 : out[d] / in[d]);  // the repeat count
    strides.push_back(0);
    view.push_back(in[d]);
    strides.push_back(in_strides[d]);
  }
  return create_strided_copy(call, view, strides, 0);
}

}  // namespace

void register_tile(runtime::KernelRegistry& registry) { registry.add({"Tile", "", {}, &create}); }

}  // namespace baton::kernels::cpu
