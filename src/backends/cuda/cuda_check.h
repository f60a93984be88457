// One check macro for every CUDA library call: runtime, driver, cuBLASLt and NVRTC. A failure
// becomes Error::DeviceError naming the call, its status string, and (where known) the device.
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <string>

#include "baton/core/check.h"

namespace baton::cuda {

inline std::string status_string(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
}
inline std::string status_string(cublasStatus_t s) {
  return fmt::format("{} ({})", cublasLtGetStatusName(s), cublasLtGetStatusString(s));
}
inline std::string status_string(nvrtcResult r) { return nvrtcGetErrorString(r); }
// "CUDA_ERROR_INVALID_VALUE (CUresult 1)" (driver.cpp: the name comes from the driver).
std::string status_string(CUresult r);

inline bool succeeded(cudaError_t e) { return e == cudaSuccess; }
inline bool succeeded(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
inline bool succeeded(nvrtcResult r) { return r == NVRTC_SUCCESS; }
inline bool succeeded(CUresult r) { return r == CUDA_SUCCESS; }

}  // namespace baton::cuda

// BATON_CUDA_CHECK(cudaMalloc(&p, n));                    -> returns DeviceError on failure
// BATON_CUDA_CHECK_ON(device, cublasLtMatmul(...));       -> the message names the device
#define BATON_CUDA_CHECK(call)                                              \
  do {                                                                      \
    const auto baton_cuda_status_ = (call);                                 \
    if (!::baton::cuda::succeeded(baton_cuda_status_)) {                    \
      return BATON_ERROR(DeviceError, "{} failed: {}", #call,               \
                         ::baton::cuda::status_string(baton_cuda_status_)); \
    }                                                                       \
  } while (0)

#define BATON_CUDA_CHECK_ON(device, call)                                          \
  do {                                                                             \
    const auto baton_cuda_status_ = (call);                                        \
    if (!::baton::cuda::succeeded(baton_cuda_status_)) {                           \
      return BATON_ERROR(DeviceError, "{} failed on cuda:{}: {}", #call, (device), \
                         ::baton::cuda::status_string(baton_cuda_status_));        \
    }                                                                              \
  } while (0)
