// ONNX Identity (opset 13): only the shape changes (ops/identity.cpp infers it), so the
// kernel copies the input's bytes. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_identity(runtime::KernelRegistry& registry) {
  registry.add({"Identity", "", {}, &create_contiguous_copy});
}

}  // namespace baton::kernels::cpu
