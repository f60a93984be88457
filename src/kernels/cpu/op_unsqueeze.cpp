// ONNX Unsqueeze (opset 13): only the shape changes (ops/squeeze.cpp infers it), so the
// kernel copies the input's bytes. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_unsqueeze(runtime::KernelRegistry& registry) {
  registry.add({"Unsqueeze", "", {}, &create_contiguous_copy});
}

}  // namespace baton::kernels::cpu
