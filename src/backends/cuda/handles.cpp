#include "backends/cuda/handles.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/driver.h"
#include "baton/core/check.h"

namespace baton::cuda {

void GreenContextTraits::destroy(CUgreenCtx g) {
  // A green context exists only where green_context_api() succeeded before.
  if (auto api = green_context_api(); api.ok()) (*api)->cuGreenCtxDestroy(g);
}

void DriverStreamTraits::destroy(CUstream s) {
  if (auto api = driver_api(); api.ok()) (*api)->cuStreamDestroy(s);
}

Result<DeviceBuffer> allocate_device_buffer(int device, uint64_t bytes, std::string_view what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  if (e == cudaSuccess) {
    DeviceBuffer buffer(p, device);
    // cudaMalloc allocates on whatever context is current. Memory that landed on another GPU
    // would make this device's kernels fault with an illegal address far from the cause (issue
    // 34: a cuda:1 engine's buffers on GPU 0), so where it landed is checked here, at load.
    cudaPointerAttributes attr{};
    BATON_CUDA_CHECK_ON(device, cudaPointerGetAttributes(&attr, p));
    BATON_CHECK_OR_RETURN(attr.device == device, Internal,
                          "{} for cuda:{} was allocated on cuda:{}: the current CUDA context was "
                          "not cuda:{}'s (a device guard did not take). Please report this",
                          what, device, attr.device, device);
    return buffer;
  }
  cudaGetLastError();
  const bool full = e == cudaErrorMemoryAllocation;
  return Status(full ? Error::OutOfMemory : Error::DeviceError,
                fmt::format("cannot allocate {} bytes of {} on cuda:{}: {}{}", bytes, what, device,
                            status_string(e),
                            full ? " (the GPU is out of memory: free some, or run fewer methods "
                                   "or smaller batches on it)"
                                 : ""));
}

Result<Event> create_event(int device, unsigned int flags) {
  cudaEvent_t e = nullptr;
  BATON_CUDA_CHECK_ON(device, cudaEventCreateWithFlags(&e, flags));
  return Event(e, device);
}

Result<Library> load_library(int device, const void* image) {
  cudaLibrary_t library = nullptr;
  BATON_CUDA_CHECK_ON(
      device, cudaLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
  return Library(library, device);
}

Result<CublasLtHandle> create_cublaslt(int device) {
  cublasLtHandle_t handle = nullptr;
  BATON_CUDA_CHECK_ON(device, cublasLtCreate(&handle));
  return CublasLtHandle(handle, device);
}

Result<MatmulDesc> create_matmul_desc(cublasComputeType_t compute, cudaDataType_t scale) {
  cublasLtMatmulDesc_t desc = nullptr;
  BATON_CUDA_CHECK(cublasLtMatmulDescCreate(&desc, compute, scale));
  return MatmulDesc(desc);
}

Result<MatrixLayout> create_matrix_layout(cudaDataType_t type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  BATON_CUDA_CHECK(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  return MatrixLayout(layout);
}

Result<MatmulPreference> create_matmul_preference() {
  cublasLtMatmulPreference_t pref = nullptr;
  BATON_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  return MatmulPreference(pref);
}

}  // namespace baton::cuda
