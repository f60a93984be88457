#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "commands.h"

namespace baton::tool {

void register_backends() {
  cuda::register_backend();
  cuda::register_compiler();
}

}  // namespace baton::tool
