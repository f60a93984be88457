// CUDA driver API functions Baton needs beyond the runtime (context save/restore, green
// contexts), fetched from the driver at run time through cudaGetDriverEntryPointByVersion. Nothing
// links libcuda, so binaries start on machines without a driver (where these are simply absent).
#pragma once

#include <cuda.h>

#include "baton/core/error.h"

namespace baton::cuda {

struct DriverApi {
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxGetState)(CUdevice, unsigned int*, int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetDevResource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*cuDevSmResourceSplitByCount)(CUdevResource*, unsigned int*, const CUdevResource*,
                                          CUdevResource*, unsigned int, unsigned int) = nullptr;
  CUresult (*cuDevResourceGenerateDesc)(CUdevResourceDesc*, CUdevResource*, unsigned int) = nullptr;
  CUresult (*cuGreenCtxCreate)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int) = nullptr;
  CUresult (*cuGreenCtxDestroy)(CUgreenCtx) = nullptr;
  CUresult (*cuGreenCtxStreamCreate)(CUstream*, CUgreenCtx, unsigned int, int) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
};

// The context and stream functions every GPU call path uses (any CUDA 12 driver has them), or
// DeviceError naming the one the driver does not provide.
Result<const DriverApi*> driver_api();
// driver_api() plus the green-context functions (CUDA 12.5 drivers and newer).
Result<const DriverApi*> green_context_api();

}  // namespace baton::cuda
