#include <mutex>

#include "baton/baton.h"
#include "baton/runtime/device_allocator.h"
#include "kernels/cpu/kernels.h"
#include "runtime/cpu_allocator.h"

namespace baton {

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    runtime::register_device_allocator(&runtime::cpu_allocator());
    kernels::cpu::register_all(runtime::OpRegistry::global());
  });
}

}  // namespace baton
