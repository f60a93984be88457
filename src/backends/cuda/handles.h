// One small move-only owner per kind of CUDA handle the backend holds, so that nothing is freed by
// hand and every early return releases what was made before it.
//
// An owner bound to a device (device >= 0) makes that device current around the destroy call
// (DeviceGuard: no switch when it already is, the previous context restored after), the way the
// backend always freed device memory, events, modules and graphs; host-side objects (cuBLASLt
// descriptors) are bound to none. Destroy calls cannot fail usefully at teardown: their status is
// ignored. Owners do not synchronize: whoever holds one orders its destruction after the work that
// uses it (e.g. a delegate handle waits for its completion event before its buffers go).
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <utility>

#include "backends/cuda/device.h"
#include "baton/core/error.h"

namespace baton::cuda {

template <typename Traits>
class Owned {
 public:
  using Raw = typename Traits::Raw;

  Owned() = default;
  // Takes ownership of `raw`; `device` is the GPU it belongs to, or -1 for host-side objects.
  explicit Owned(Raw raw, int device = -1) : raw_(raw), device_(device) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept : raw_(std::exchange(other.raw_, Raw{})), device_(other.device_) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, Raw{});
      device_ = other.device_;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  Raw get() const { return raw_; }
  explicit operator bool() const { return raw_ != Raw{}; }
  int device() const { return device_; }

  // Gives the handle up without destroying it; the caller owns it from now on.
  [[nodiscard]] Raw release() { return std::exchange(raw_, Raw{}); }

  // Destroys the handle now (on its device), leaving the owner empty.
  void reset() {
    if (raw_ == Raw{}) return;
    if (device_ >= 0) {
      DeviceGuard guard(device_);
      Traits::destroy(raw_);
    } else {
      Traits::destroy(raw_);
    }
    raw_ = Raw{};
  }

 private:
  Raw raw_{};
  int device_ = -1;
};

struct DeviceMemoryTraits {
  using Raw = void*;
  static void destroy(Raw p) { cudaFree(p); }
};
struct EventTraits {
  using Raw = cudaEvent_t;
  static void destroy(Raw e) { cudaEventDestroy(e); }
};
struct LibraryTraits {
  using Raw = cudaLibrary_t;
  static void destroy(Raw l) { cudaLibraryUnload(l); }
};
struct GraphTraits {
  using Raw = cudaGraph_t;
  static void destroy(Raw g) { cudaGraphDestroy(g); }
};
struct GraphExecTraits {
  using Raw = cudaGraphExec_t;
  static void destroy(Raw g) { cudaGraphExecDestroy(g); }
};
struct StreamTraits {
  using Raw = cudaStream_t;
  static void destroy(Raw s) { cudaStreamDestroy(s); }
};
struct CublasLtTraits {
  using Raw = cublasLtHandle_t;
  static void destroy(Raw h) { cublasLtDestroy(h); }
};
struct MatmulDescTraits {
  using Raw = cublasLtMatmulDesc_t;
  static void destroy(Raw d) { cublasLtMatmulDescDestroy(d); }
};
struct MatrixLayoutTraits {
  using Raw = cublasLtMatrixLayout_t;
  static void destroy(Raw l) { cublasLtMatrixLayoutDestroy(l); }
};
struct MatmulPreferenceTraits {
  using Raw = cublasLtMatmulPreference_t;
  static void destroy(Raw p) { cublasLtMatmulPreferenceDestroy(p); }
};
// Green contexts and their streams come from the driver API, fetched at run time (driver.h).
struct GreenContextTraits {
  using Raw = CUgreenCtx;
  static void destroy(Raw g);
};
struct DriverStreamTraits {
  using Raw = CUstream;
  static void destroy(Raw s);
};

using DeviceBuffer = Owned<DeviceMemoryTraits>;          // cudaMalloc'd memory
using Event = Owned<EventTraits>;                        // cudaEvent_t
using Library = Owned<LibraryTraits>;                    // cudaLibrary_t (an engine's cubin)
using Graph = Owned<GraphTraits>;                        // cudaGraph_t (a captured graph)
using GraphExec = Owned<GraphExecTraits>;                // cudaGraphExec_t
using OwnedStream = Owned<StreamTraits>;                 // cudaStream_t (baton::cuda::Stream)
using CublasLtHandle = Owned<CublasLtTraits>;            // cublasLtHandle_t
using MatmulDesc = Owned<MatmulDescTraits>;              // cublasLtMatmulDesc_t
using MatrixLayout = Owned<MatrixLayoutTraits>;          // cublasLtMatrixLayout_t
using MatmulPreference = Owned<MatmulPreferenceTraits>;  // cublasLtMatmulPreference_t
using GreenContextHandle = Owned<GreenContextTraits>;    // CUgreenCtx
using DriverStream = Owned<DriverStreamTraits>;          // CUstream made by the driver API

// The makers below create on `device`, which must be current (a DeviceGuard's job); errors are
// DeviceError naming the call, its status and the device.

// cudaMalloc of `bytes` (256 when 0): OutOfMemory when the GPU is full, DeviceError otherwise,
// the message naming `what` the memory is for and the device.
Result<DeviceBuffer> allocate_device_buffer(int device, uint64_t bytes, std::string_view what);
Result<Event> create_event(int device, unsigned int flags = cudaEventDefault);
// Loads a cubin image (which need not outlive the library).
Result<Library> load_library(int device, const void* image);
Result<CublasLtHandle> create_cublaslt(int device);
// Host-side cuBLASLt descriptors (bound to no device).
Result<MatmulDesc> create_matmul_desc(cublasComputeType_t compute, cudaDataType_t scale);
Result<MatrixLayout> create_matrix_layout(cudaDataType_t type, uint64_t rows, uint64_t cols,
                                          int64_t ld);
Result<MatmulPreference> create_matmul_preference();

}  // namespace baton::cuda
