#include "backends/cuda/driver.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "baton/core/check.h"

namespace baton::cuda {
namespace {

// Green contexts arrived in CUDA 12.4.
constexpr unsigned int kDriverVersion = 12040;

template <typename Fn>
Status load(const char* name, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &p, kDriverVersion, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return BATON_ERROR(DeviceError,
                       "the CUDA driver does not provide {} (needs a driver for CUDA 12.4 or "
                       "newer): {}",
                       name, cudaGetErrorString(e));
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
    take(load("cuCtxGetCurrent", &api.cuCtxGetCurrent));
    take(load("cuCtxSetCurrent", &api.cuCtxSetCurrent));
    take(load("cuDeviceGet", &api.cuDeviceGet));
    take(load("cuDeviceGetDevResource", &api.cuDeviceGetDevResource));
    take(load("cuDevSmResourceSplitByCount", &api.cuDevSmResourceSplitByCount));
    take(load("cuDevResourceGenerateDesc", &api.cuDevResourceGenerateDesc));
    take(load("cuGreenCtxCreate", &api.cuGreenCtxCreate));
    take(load("cuGreenCtxDestroy", &api.cuGreenCtxDestroy));
    take(load("cuGreenCtxStreamCreate", &api.cuGreenCtxStreamCreate));
    take(load("cuStreamDestroy", &api.cuStreamDestroy));
    take(load("cuStreamGetCtx", &api.cuStreamGetCtx));
    return s;
  }();
  if (!status.ok()) return status;
  return &api;
}

}  // namespace baton::cuda
