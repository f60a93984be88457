#include "baton/cuda/green_context.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/handles.h"

namespace baton::cuda {
namespace {

// A green context and a non-blocking stream on it, for `resource` of `dev`. Both are handed to the
// GreenContext (which destroys them) only once both exist.
Status make(const DriverApi& api, CUdevice dev, CUdevResource resource, void** context,
            cudaStream_t* stream) {
  CUdevResourceDesc desc = nullptr;
  BATON_CUDA_CHECK(api.cuDevResourceGenerateDesc(&desc, &resource, 1));
  CUgreenCtx raw_green = nullptr;
  BATON_CUDA_CHECK(api.cuGreenCtxCreate(&raw_green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  GreenContextHandle green(raw_green);
  CUstream raw_stream = nullptr;
  BATON_CUDA_CHECK(api.cuGreenCtxStreamCreate(&raw_stream, green.get(), CU_STREAM_NON_BLOCKING, 0));
  DriverStream s(raw_stream);
  *context = green.release();
  *stream = reinterpret_cast<cudaStream_t>(s.release());
  return Status();
}

}  // namespace

Result<std::pair<GreenContext, GreenContext>> GreenContext::split(int device, int sm_count) {
  BATON_ASSIGN_OR_RETURN(const DriverApi* api, green_context_api());
  BATON_CHECK_OR_RETURN(device >= 0 && device < device_count(), InvalidArgument,
                        "green context on cuda:{}: this machine has {} CUDA device(s)", device,
                        device_count());
  // Green contexts need the device's primary context initialized.
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  BATON_CUDA_CHECK_ON(device, cudaFree(nullptr));
  CUdevice dev = 0;
  BATON_CUDA_CHECK_ON(device, api->cuDeviceGet(&dev, device));
  CUdevResource all{};
  BATON_CUDA_CHECK_ON(device, api->cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  BATON_CHECK_OR_RETURN(sm_count >= 1 && static_cast<unsigned>(sm_count) < all.sm.smCount,
                        InvalidArgument,
                        "a green context of {} SMs on cuda:{}: the device has {} SMs; ask for 1 to "
                        "{}",
                        sm_count, device, all.sm.smCount, all.sm.smCount - 1);
  CUdevResource group{}, rest{};
  unsigned int groups = 1;
  BATON_CUDA_CHECK_ON(device, api->cuDevSmResourceSplitByCount(&group, &groups, &all, &rest, 0,
                                                               static_cast<unsigned>(sm_count)));
  BATON_CHECK_OR_RETURN(groups == 1 && rest.sm.smCount > 0, NotSupported,
                        "cuda:{} cannot be split into {} SMs and a remainder", device, sm_count);
  GreenContext first, second;
  first.device_ = second.device_ = device;
  first.requested_ = sm_count;
  first.sm_count_ = static_cast<int>(group.sm.smCount);
  second.sm_count_ = second.requested_ = static_cast<int>(rest.sm.smCount);
  BATON_TRY(make(*api, dev, group, &first.context_, &first.stream_));
  BATON_TRY(make(*api, dev, rest, &second.context_, &second.stream_));
  return std::make_pair(std::move(first), std::move(second));
}

Result<GreenContext> GreenContext::create(int device, int sm_count) {
  BATON_ASSIGN_OR_RETURN(auto pair, split(device, sm_count));
  return std::move(pair.first);
}

GreenContext::GreenContext(GreenContext&& o) noexcept { *this = std::move(o); }

GreenContext& GreenContext::operator=(GreenContext&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    sm_count_ = o.sm_count_;
    requested_ = o.requested_;
    context_ = o.context_;
    stream_ = o.stream_;
    o.context_ = nullptr;
    o.stream_ = nullptr;
  }
  return *this;
}

GreenContext::~GreenContext() { release(); }

void GreenContext::release() {
  // The stream first: it belongs to the context.
  DriverStream(reinterpret_cast<CUstream>(std::exchange(stream_, nullptr))).reset();
  GreenContextHandle(static_cast<CUgreenCtx>(std::exchange(context_, nullptr))).reset();
}

}  // namespace baton::cuda
