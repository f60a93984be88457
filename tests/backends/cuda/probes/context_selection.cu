// Which GPU the CUDA runtime uses on a thread whose current context was set back to none through
// the driver API, the state a device guard leaves behind in a fresh process. A probe, not a test:
// it explains why baton::cuda::DeviceGuard (src/backends/cuda/device.cpp) decides from the current
// context and never from cudaGetDevice. Needs two GPUs.
//   nvcc -arch=sm_90 -O2 -o context_selection context_selection.cu -lcuda
//   ./context_selection
// Each line: what the step did; the current context's device (-1: none) and whether GPU 0 and GPU 1
// have an active primary context; then cudaGetDevice and the device the step's cudaMalloc landed
// on; then the context's device and GPU 0's state again (cudaGetDevice may bind a context).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace {

int context_device() {
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  if (ctx == nullptr) return -1;
  CUdevice d = -1;
  cuCtxGetDevice(&d);
  return static_cast<int>(d);
}

int active(int device) {
  unsigned flags = 0;
  int on = 0;
  cuDevicePrimaryCtxGetState(device, &flags, &on);
  return on;
}

void report(const char* step, void* allocated) {
  // Asked before cudaGetDevice, which may itself bind a context.
  const int ctx_device = context_device();
  const int gpu0 = active(0), gpu1 = active(1);
  int runtime_device = -9;
  const cudaError_t e = cudaGetDevice(&runtime_device);
  int landed = -9;
  if (allocated != nullptr) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, allocated) == cudaSuccess) landed = attr.device;
  }
  std::printf(
      "%-58s context_device=%d gpu0_active=%d gpu1_active=%d | cudaGetDevice=%d(%s) "
      "malloc_on=%d | after: context_device=%d gpu0_active=%d\n",
      step, ctx_device, gpu0, gpu1, runtime_device, cudaGetErrorName(e), landed, context_device(),
      active(0));
}

}  // namespace

int main() {
  cuInit(0);
  int n = 0;
  cudaGetDeviceCount(&n);
  if (n < 2) {
    std::printf("needs two GPUs, found %d\n", n);
    return 2;
  }
  report("fresh process", nullptr);
  // What the old DeviceGuard did: cudaSetDevice(1), work, restore the previous context (none).
  cudaSetDevice(1);
  void* a = nullptr;
  cudaMalloc(&a, 1 << 20);
  report("cudaSetDevice(1); cudaMalloc", a);
  cuCtxSetCurrent(nullptr);
  report("cuCtxSetCurrent(NULL)", nullptr);
  // The next guard for cuda:1 compared cudaGetDevice with 1 and, when equal, did not switch.
  void* b = nullptr;
  const cudaError_t e = cudaMalloc(&b, 1 << 20);
  std::printf("cudaMalloc with no current context: %s\n", cudaGetErrorName(e));
  report("cudaMalloc after that (no switch)", b);
  // What the new guard does: the primary context of GPU 1 made current through the driver.
  cuCtxSetCurrent(nullptr);
  CUcontext primary = nullptr;
  cuDevicePrimaryCtxRetain(&primary, 1);
  cuCtxSetCurrent(primary);
  void* c = nullptr;
  cudaMalloc(&c, 1 << 20);
  report("cuDevicePrimaryCtxRetain(1)+cuCtxSetCurrent; cudaMalloc", c);
  cuCtxSetCurrent(nullptr);
  report("restored none", nullptr);
  return 0;
}
