#include "backends/cuda/driver.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "baton/core/check.h"

namespace baton::cuda {
namespace {

// Each function is asked for at the ABI version whose signature DriverApi declares (see
// cudaTypedefs.h: e.g. cuStreamGetCtx gained a third parameter in 12.5, cuGreenCtxStreamCreate
// appeared in 12.5).
template <typename Fn>
Status load(const char* name, unsigned int version, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return BATON_ERROR(DeviceError,
                       "the CUDA driver does not provide {} (version {}; needs a driver for CUDA "
                       "12.5 or newer): {}",
                       name, version, cudaGetErrorString(e));
  }
  *fn = reinterpret_cast<Fn>(p);
  return Status();
}

}  // namespace

Result<const DriverApi*> driver_api() {
  static DriverApi api;
  static Status status = [] {
    Status s;
    auto take = [&](Status st) {
      if (s.ok() && !st.ok()) s = std::move(st);
    };
    take(load("cuCtxGetCurrent", 4000, &api.cuCtxGetCurrent));
    take(load("cuCtxSetCurrent", 4000, &api.cuCtxSetCurrent));
    take(load("cuDeviceGet", 2000, &api.cuDeviceGet));
    take(load("cuDeviceGetDevResource", 12040, &api.cuDeviceGetDevResource));
    take(load("cuDevSmResourceSplitByCount", 12040, &api.cuDevSmResourceSplitByCount));
    take(load("cuDevResourceGenerateDesc", 12040, &api.cuDevResourceGenerateDesc));
    take(load("cuGreenCtxCreate", 12040, &api.cuGreenCtxCreate));
    take(load("cuGreenCtxDestroy", 12040, &api.cuGreenCtxDestroy));
    take(load("cuGreenCtxStreamCreate", 12050, &api.cuGreenCtxStreamCreate));
    take(load("cuStreamDestroy", 4000, &api.cuStreamDestroy));
    take(load("cuStreamGetCtx", 9020, &api.cuStreamGetCtx));
    return s;
  }();
  if (!status.ok()) return status;
  return &api;
}

}  // namespace baton::cuda
