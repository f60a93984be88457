// ONNX Flatten (opset 13+): copies the input into a 2-D [prod(d[:axis]), prod(d[axis:])] tensor;
// axis in [-rank, rank], any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Flatten";
constexpr size_t kAxis = 0;

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const TensorView& x = call.inputs[0]->tensor;
  const int64_t rank = x.rank();
  const int64_t axis = call.attrs[kAxis]->i;
  // Unlike most axes, Flatten's may equal the rank (everything goes to the outer dimension).
  BATON_CHECK_OR_RETURN(axis >= -rank && axis <= rank, InvalidArgument,
                        "{}: axis {} is out of range [{}, {}] for the rank-{} input {}",
                        describe(kName, call), axis, -rank, rank, rank, shape_to_string(x.sizes));
  const size_t split = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  outputs[0].dtype = x.dtype;
  outputs[0].sizes = {product(x.sizes, 0, split), product(x.sizes, split, x.sizes.size())};
  return Status::ok_status();
}

}  // namespace

void register_flatten(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.attrs = {int_attr("axis", 1)};
  schema.infer = &infer;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
