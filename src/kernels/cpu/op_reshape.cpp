// ONNX Reshape (opset 13): only the shape changes (ops/reshape.cpp infers it), so the
// kernel copies the input's bytes. Any dtype. At resize() the output's sizes are the runtime's:
// the `shape` input holds the largest shape and is never read (common.h, ContiguousCopyKernel).
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_reshape(runtime::KernelRegistry& registry) {
  registry.add({"Reshape", "", {}, &create_contiguous_copy});
}

}  // namespace baton::kernels::cpu
