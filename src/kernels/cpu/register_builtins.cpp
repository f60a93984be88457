#include <cblas.h>

#include <mutex>

#include "baton/baton.h"
#include "baton/runtime/device_allocator.h"
#include "kernels/cpu/kernels.h"
#include "runtime/cpu_allocator.h"

namespace baton {

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    // OpenBLAS's threaded GEMM mallocs a job buffer on every call, and execute() must not
    // allocate: Baton's CPU kernels run BLAS on the calling thread.
    openblas_set_num_threads(1);
    runtime::register_device_allocator(&runtime::cpu_allocator());
    kernels::cpu::register_all(runtime::kernel_registry());
  });
}

}  // namespace baton
