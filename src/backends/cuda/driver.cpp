#include "backends/cuda/driver.h"

#include <cuda_runtime_api.h>

#include <initializer_list>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "baton/core/check.h"

namespace baton::cuda {
namespace {

// Each function is asked for at the ABI version whose signature DriverApi declares (see
// cudaTypedefs.h: e.g. cuStreamGetCtx gained a third parameter in 12.5, cuGreenCtxStreamCreate
// appeared in 12.5).
template <typename Fn>
Status load(const char* name, unsigned int version, const char* needs, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return BATON_ERROR(DeviceError,
                       "the CUDA driver does not provide {} (version {}): {} needs a driver for "
                       "CUDA {} or newer ({})",
                       name, version, name, needs, cudaGetErrorString(e));
  }
  *fn = reinterpret_cast<Fn>(p);
  return Status();
}

DriverApi& api_storage() {
  static DriverApi api;
  return api;
}

// The first failure of a list of loads.
Status first_failure(std::initializer_list<Status> loads) {
  for (const Status& s : loads) {
    if (!s.ok()) return s;
  }
  return Status();
}

}  // namespace

Result<const DriverApi*> driver_api() {
  static const Status status = [] {
    DriverApi& api = api_storage();
    return first_failure(
        {load("cuCtxGetCurrent", 4000, "4.0", &api.cuCtxGetCurrent),
         load("cuCtxSetCurrent", 4000, "4.0", &api.cuCtxSetCurrent),
         load("cuCtxGetDevice", 2000, "2.0", &api.cuCtxGetDevice),
         load("cuDevicePrimaryCtxRetain", 7000, "7.0", &api.cuDevicePrimaryCtxRetain),
         load("cuDevicePrimaryCtxGetState", 7000, "7.0", &api.cuDevicePrimaryCtxGetState),
         load("cuDeviceGet", 2000, "2.0", &api.cuDeviceGet),
         load("cuStreamDestroy", 4000, "4.0", &api.cuStreamDestroy),
         load("cuStreamGetCtx", 9020, "9.2", &api.cuStreamGetCtx),
         load("cuGetErrorName", 6000, "6.0", &api.cuGetErrorName)});
  }();
  if (!status.ok()) return status;
  return &api_storage();
}

Result<const DriverApi*> green_context_api() {
  BATON_TRY(driver_api());
  static const Status status = [] {
    DriverApi& api = api_storage();
    return first_failure(
        {load("cuDeviceGetDevResource", 12040, "12.4", &api.cuDeviceGetDevResource),
         load("cuDevSmResourceSplitByCount", 12040, "12.4", &api.cuDevSmResourceSplitByCount),
         load("cuDevResourceGenerateDesc", 12040, "12.4", &api.cuDevResourceGenerateDesc),
         load("cuGreenCtxCreate", 12040, "12.4", &api.cuGreenCtxCreate),
         load("cuGreenCtxDestroy", 12040, "12.4", &api.cuGreenCtxDestroy),
         load("cuGreenCtxStreamCreate", 12050, "12.5", &api.cuGreenCtxStreamCreate)});
  }();
  if (!status.ok()) return status;
  return &api_storage();
}

std::string status_string(CUresult r) {
  const char* name = nullptr;
  auto api = driver_api();
  if (api.ok() && (*api)->cuGetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr) {
    return fmt::format("{} (CUresult {})", name, static_cast<int>(r));
  }
  return fmt::format("CUresult {}", static_cast<int>(r));
}

}  // namespace baton::cuda
