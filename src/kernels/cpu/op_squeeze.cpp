// ONNX Squeeze (opset 13): only the shape changes (ops/squeeze.cpp infers it), so the
// kernel copies the input's bytes. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_squeeze(runtime::KernelRegistry& registry) {
  registry.add({"Squeeze", "", {}, &create_contiguous_copy});
}

}  // namespace baton::kernels::cpu
