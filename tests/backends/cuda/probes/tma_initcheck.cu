// What compute-sanitizer's initcheck sees. A probe, not a test: it explains why the CUDA engine
// declares GEMM outputs and graph-copy sources initialized (engine.cpp, declare_library_writes)
// and why the lifecycle test skips its device-drift check under initcheck. The store modes write
// one 64x64 float tile, then a plain kernel reads it.
//   nvcc -arch=sm_90a -O2 -o tma_initcheck tma_initcheck.cu -lcuda -lcublasLt
//   compute-sanitizer --tool initcheck ./tma_initcheck
//   plain|bulk|tensor|graph|context|flat|module|lt [mark|markgreen]
// On the H100 host (compute-sanitizer 2025.3.1, driver 580): plain 0 errors; bulk (cp.async.bulk)
// 4088 and tensor (cp.async.bulk.tensor) 4096 uninitialized-read reports, though the sum is right;
// graph (a kernel's store and a memcpy node of it in one CUDA graph) 320; bulk or tensor with
// `mark` (declared initialized through NVTX) 0; context with `markgreen` (the declaration on a
// green context's stream) kills the process; flat, module and lt (50 cycles of allocations, module
// loads, cuBLASLt handles) leave free device memory unchanged.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtMemCudaRt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

constexpr int N = 64;  // 64x64 floats, one tile

__global__ void plain_store(float* dst) {
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) dst[i] = float(i);
}

__global__ void bulk_store(float* dst) {
  __shared__ alignas(128) float tile[N * N];
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) tile[i] = float(i);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(s),
                 "r"(int(N * N * sizeof(float)))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

__global__ void tensor_store(const __grid_constant__ CUtensorMap map) {
  __shared__ alignas(128) float tile[N * N];
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) tile[i] = float(i);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&map),
        "r"(0), "r"(0), "r"(s)
        : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

__global__ void reader(const float* src, float* sum) {
  float s = 0;
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) s += src[i];
  atomicAdd(sum, s);
}

// Declares [p, p + bytes) initialized on `stream` through NVTX's memory API.
void mark_initialized(const void* p, size_t bytes, cudaStream_t stream) {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("probe");
  nvtxMemVirtualRangeDesc_t range{bytes, p};
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain, stream, 0, &batch);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "plain";
  if (mode[0] == 'm' || mode[0] == 'l') {  // 50 module load/unload or cuBLASLt handle cycles
    size_t free0 = 0, free1 = 0, total = 0;
    void* buf = nullptr;
    cudaMalloc(&buf, 256);
    const char* ptx =
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry k(.param .u64 p) { .reg .b64 %rd<2>; ld.param.u64 %rd1, [p];"
        " cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], 1; ret; }\n";
    for (int warm = 0; warm < 2; ++warm) {
      if (warm == 1) cudaMemGetInfo(&free0, &total);
      for (int i = 0; i < 50; ++i) {
        if (mode[0] == 'm') {
          CUmodule m;
          if (cuModuleLoadData(&m, ptx) != CUDA_SUCCESS) {
            printf("load failed\n");
            return 2;
          }
          CUfunction f;
          cuModuleGetFunction(&f, m, "k");
          void* args[] = {&buf};
          cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
          cudaDeviceSynchronize();
          cuModuleUnload(m);
        } else {
          cublasLtHandle_t h;
          cublasLtCreate(&h);
          cublasLtDestroy(h);
        }
      }
    }
    cudaMemGetInfo(&free1, &total);
    printf("%s: 50 cycles: free memory drift %lld bytes\n", mode,
           (long long)free0 - (long long)free1);
    return 0;
  }
  if (mode[0] == 'f') {  // free device memory across 50 allocate-write-free cycles (and marks)
    const bool marks = argc > 2 && std::strcmp(argv[2], "mark") == 0;
    size_t free0 = 0, free1 = 0, total = 0;
    cudaFree(nullptr);
    cudaMemGetInfo(&free0, &total);
    for (int i = 0; i < 50; ++i) {
      float* p = nullptr;
      cudaMalloc(&p, 4 << 20);
      if (marks) mark_initialized(p, 4 << 20, nullptr);
      plain_store<<<1, 256>>>(p);
      cudaDeviceSynchronize();
      cudaFree(p);
    }
    cudaMemGetInfo(&free1, &total);
    printf("flat: 50 cycles of a 4 MiB buffer%s: free memory drift %lld bytes\n",
           marks ? " declared initialized" : "", (long long)free0 - (long long)free1);
    return 0;
  }
  float *buf, *sum;
  cudaMalloc(&buf, N * N * sizeof(float));
  cudaMalloc(&sum, sizeof(float));
  cudaMemset(sum, 0, sizeof(float));
  if (mode[0] == 'p') plain_store<<<1, 256>>>(buf);
  if (mode[0] == 'b') bulk_store<<<1, 256>>>(buf);
  const char* mark = argc > 2 ? argv[2] : "";
  if (std::strcmp(mark, "mark") == 0) mark_initialized(buf, N * N * sizeof(float), nullptr);
  if (mode[0] == 't') {
    CUtensorMap map;
    cuuint64_t dims[2] = {N, N};
    cuuint64_t strides[1] = {N * sizeof(float)};
    cuuint32_t box[2] = {N, N};
    cuuint32_t estr[2] = {1, 1};
    // box of 64x64 floats = 16 KiB; box dims must be <= 256
    CUresult r =
        cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, buf, dims, strides, box,
                               estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      printf("encode failed %d\n", r);
      return 2;
    }
    tensor_store<<<1, 256>>>(map);
  }
  if (mode[0] == 'c') {  // a kernel on a green context's stream (16 SMs), then read back
    cudaFree(nullptr);
    CUdevice dev;
    cuDeviceGet(&dev, 0);
    CUdevResource all{}, group{}, rest{};
    cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    unsigned groups = 1;
    cuDevSmResourceSplitByCount(&group, &groups, &all, &rest, 0, 16);
    CUdevResourceDesc desc;
    cuDevResourceGenerateDesc(&desc, &group, 1);
    CUgreenCtx green;
    cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    CUstream gs;
    cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0);
    if (std::strcmp(mark, "markgreen") == 0)
      mark_initialized(buf, N * N * sizeof(float), reinterpret_cast<cudaStream_t>(gs));
    plain_store<<<1, 256, 0, reinterpret_cast<cudaStream_t>(gs)>>>(buf);
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(gs));
    printf("green: launched on a %u-SM green context\n", group.sm.smCount);
  }
  if (mode[0] == 'g') {  // a kernel's store, then a copy of it, in one captured CUDA graph
    float* copy = nullptr;
    cudaMalloc(&copy, N * N * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    plain_store<<<1, 256, 0, s>>>(buf);
    cudaMemcpyAsync(copy, buf, N * N * sizeof(float), cudaMemcpyDeviceToDevice, s);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&e, g, 0);
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    reader<<<1, 256>>>(copy, sum);
  } else {
    reader<<<1, 256>>>(buf, sum);
  }
  float h = 0;
  cudaMemcpy(&h, sum, sizeof(float), cudaMemcpyDeviceToHost);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s: sum %.0f (expect %.0f) %s\n", mode, h, double(N * N) * (N * N - 1) / 2,
         cudaGetErrorString(e));
  return 0;
}
