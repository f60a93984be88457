// ONNX Concat (opset 13+): joins its inputs along `axis`; all inputs have one dtype (any) and one
// rank, and equal sizes except along the axis.
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Concat";
constexpr size_t kAxis = 0;

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  for (size_t i = 0; i < call.inputs.size(); ++i) BATON_TRY(check_tensor_input(call, i, what));
  const TensorView& first = call.inputs[0]->tensor;
  const int rank = first.rank();
  BATON_CHECK_OR_RETURN(rank >= 1, InvalidArgument, "{}: inputs must have rank >= 1, got {}", what,
                        shape_to_string(first.sizes));
  BATON_ASSIGN_OR_RETURN(const int axis, normalize_axis(call.attrs[kAxis]->i, rank, what));
  std::vector<int64_t> sizes(first.sizes.begin(), first.sizes.end());
  for (size_t i = 1; i < call.inputs.size(); ++i) {
    const TensorView& t = call.inputs[i]->tensor;
    BATON_CHECK_OR_RETURN(t.dtype == first.dtype, InvalidArgument,
                          "{}: input {} is {} but input 0 is {}; all inputs must have one dtype",
                          what, i, dtype_name(t.dtype), dtype_name(first.dtype));
    bool same = t.rank() == rank;
    for (int d = 0; d < rank && same; ++d) same = d == axis || t.sizes[d] == first.sizes[d];
    BATON_CHECK_OR_RETURN(same, InvalidArgument,
                          "{}: input {} has shape {} but input 0 has {}; they may differ only "
                          "along axis {}",
                          what, i, shape_to_string(t.sizes), shape_to_string(first.sizes), axis);
    sizes[axis] += t.sizes[axis];
  }
  outputs[0].dtype = first.dtype;
  outputs[0].sizes = std::move(sizes);
  return Status::ok_status();
}

// Seen as [outer, axis, inner], the output is, for each outer index, every input's [axis, inner]
// block in turn: one memcpy per input per outer index.
class ConcatKernel final : public runtime::Kernel {
 public:
  struct Part {
    const runtime::Value* value;
    size_t block_bytes;
  };

  ConcatKernel(std::vector<Part> parts, runtime::Value* out, int64_t outer)
      : parts_(std::move(parts)), out_(out), outer_(outer) {}

  Status run() override {
    char* dst = static_cast<char*>(out_->tensor.data);
    for (int64_t o = 0; o < outer_; ++o) {
      for (const Part& part : parts_) {
        if (part.block_bytes == 0) continue;
        const char* src = static_cast<const char*>(part.value->tensor.data);
        std::memcpy(dst, src + static_cast<size_t>(o) * part.block_bytes, part.block_bytes);
        dst += part.block_bytes;
      }
    }
    return Status::ok_status();
  }

 private:
  std::vector<Part> parts_;
  runtime::Value* out_;
  int64_t outer_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  const TensorView& first = call.inputs[0]->tensor;
  BATON_ASSIGN_OR_RETURN(const int a,
                         normalize_axis(call.attrs[kAxis]->i, first.rank(), describe(kName, call)));
  const auto axis = static_cast<size_t>(a);
  const int64_t outer = product(first.sizes, 0, axis);
  const size_t inner_bytes =
      static_cast<size_t>(product(first.sizes, axis + 1, first.sizes.size())) *
      dtype_size(first.dtype);
  std::vector<ConcatKernel::Part> parts;
  for (const runtime::Value* v : call.inputs) {
    const size_t block = static_cast<size_t>(v->tensor.sizes[axis]) * inner_bytes;
    parts.push_back({v, block});
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ConcatKernel>(std::move(parts), call.outputs[0], outer));
}

}  // namespace

void register_concat(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 1;
  schema.max_inputs = -1;
  schema.attrs = {required_int_attr("axis")};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
