// ONNX Slice (opset 13): a strided copy (strided_copy.h) of the part ops/slice.h describes; starts,
// ends, axes and steps are program constants, read once at create. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"
#include "ops/slice.h"

namespace baton::kernels::cpu {
namespace {

std::vector<int64_t> values(const TensorView& t) {
  return ops::int_values_of(t.dtype, t.data, t.numel());
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  std::vector<int64_t> axes, steps;
  if (call.has_input(3)) axes = values(call.input(3));
  if (call.has_input(4)) steps = values(call.input(4));
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::SliceDim> dims,
                         ops::slice_dims(data.sizes, values(call.input(1)), values(call.input(2)),
                                         call.has_input(3) ? &axes : nullptr,
                                         call.has_input(4) ? &steps : nullptr, call.describe()));
  const std::span<const int64_t> out = call.output(0).sizes;
  std::vector<int64_t> strides(dims.size(), 0);
  int64_t base = 0;
  if (call.output(0).numel() != 0) {
    // Every start is inside a non-empty input; a dimension that keeps two or more elements has a
    // step shorter than itself, so its stride stays inside the input too.
    const std::vector<int64_t> in_strides = element_strides(data.sizes);
    for (size_t d = 0; d < dims.size(); ++d) {
      base += dims[d].start * in_strides[d];
      if (out[d] > 1) strides[d] = dims[d].step * in_strides[d];
    }
  }
  return create_strided_copy(call, out, strides, base);
}

}  // namespace

void register_slice(runtime::KernelRegistry& registry) { registry.add({"Slice", "", {}, &create}); }

}  // namespace baton::kernels::cpu
