// StreamGuard's selection logic and the load-time device checks, without a GPU: guards are
// scoped, nestable, thread-local; the engine's device and architecture checks run against
// injected device properties.
#include "baton/cuda/stream_guard.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/cuda/device.h"
#include "backends/cuda/engine.h"
#include "backends/cuda/engine_format.h"
#include "testing/aligned_bytes.h"

namespace baton::cuda {
namespace {

cudaStream_t fake(uintptr_t id) { return reinterpret_cast<cudaStream_t>(id); }

TEST(StreamGuardTest, NestsAndRestores) {
  EXPECT_EQ(current_stream_guard(), nullptr);
  EXPECT_FALSE(stream_selected());
  EXPECT_EQ(current_stream(), cudaStreamPerThread);
  {
    StreamGuard outer(fake(0x100));
    EXPECT_EQ(current_stream(), fake(0x100));
    {
      StreamGuard inner(fake(0x200));
      EXPECT_EQ(current_stream(), fake(0x200));
      EXPECT_EQ(current_stream_guard(), &inner);
    }
    EXPECT_EQ(current_stream(), fake(0x100));
    EXPECT_TRUE(stream_selected());
  }
  EXPECT_EQ(current_stream(), cudaStreamPerThread);
  EXPECT_FALSE(stream_selected());
}

TEST(StreamGuardTest, IsThreadLocal) {
  StreamGuard mine(fake(0x300));
  cudaStream_t seen = fake(0x1);
  bool selected = true;
  std::thread other([&] {
    seen = current_stream();
    selected = stream_selected();
  });
  other.join();
  EXPECT_EQ(seen, cudaStreamPerThread);
  EXPECT_FALSE(selected);
  EXPECT_EQ(current_stream(), fake(0x300));
}

// A minimal valid engine: no steps, one binding.
std::vector<uint8_t> blob_for(int device, uint32_t arch) {
  EngineDescription e;
  e.device_id = device;
  e.sm_arch = arch;
  e.bindings = {{"x", DType::Float32, false, {4}}};
  return write_engine_blob(e).value();
}

// `mapped_to`: where a device map moves the engine (-1: none).
Status load_with(std::vector<DeviceInfo> devices, int device, uint32_t arch, int mapped_to = -1) {
  override_devices_for_testing(std::move(devices));
  const testing::AlignedBytes blob(blob_for(device, arch));
  Status s =
      Engine::load(blob.span(), "cuda_0", /*tune_candidates=*/4, false, nullptr, {}, mapped_to)
          .status();
  override_devices_for_testing(std::nullopt);
  return s;
}

TEST(LoadCheckTest, AMissingDeviceIsNamedWithWhatThereIsAndTheRebuildCommand) {
  const Status s = load_with({{0, "Fake H200", 90, 132, 1}}, /*device=*/3, 90);
  ASSERT_EQ(s.code(), Error::NotSupported) << s.to_string();
  EXPECT_NE(
      s.message().find("partition 'cuda_0' was built for cuda:3 (sm_90), but this machine has "
                       "1 CUDA device(s): cuda:0 (sm_90)"),
      std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("baton compile MODEL.onnx --device cuda:N"), std::string::npos);
}

// An engine moved by a device map is checked where it goes, and the message names the map: a
// target GPU that does not exist, or one of another architecture.
TEST(LoadCheckTest, AMappedEngineIsCheckedOnTheGpuItIsMappedTo) {
  Status s = load_with({{0, "Fake H200", 90, 132, 1}}, /*device=*/0, 90, /*mapped_to=*/2);
  ASSERT_EQ(s.code(), Error::NotSupported) << s.to_string();
  EXPECT_NE(s.message().find("partition 'cuda_0' (built for cuda:0, sm_90) is mapped to cuda:2 by "
                             "the device map, but this machine has 1 CUDA device(s): cuda:0 "
                             "(sm_90). Map it to a GPU that exists: --device-map cuda:0=cuda:N"),
            std::string::npos)
      << s.message();
  s = load_with({{0, "Fake H200", 90, 132, 1}, {1, "Fake A100", 80, 108, 1}}, 0, 90, 1);
  ASSERT_EQ(s.code(), Error::NotSupported) << s.to_string();
  EXPECT_NE(s.message().find("was built for sm_90 but cuda:1 (mapped there from cuda:0 by the "
                             "device map) is sm_80"),
            std::string::npos)
      << s.message();
}

TEST(LoadCheckTest, AnotherArchitectureIsNamedWithTheRebuildCommand) {
  const Status s = load_with({{0, "Fake A100", 80, 108, 1}}, 0, 90);
  ASSERT_EQ(s.code(), Error::NotSupported) << s.to_string();
  EXPECT_NE(s.message().find("partition 'cuda_0' was built for sm_90 but cuda:0 is sm_80"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--arch sm_80"), std::string::npos) << s.message();
}

TEST(LoadCheckTest, ANewerMinorRevisionRunsAnOlderCubin) {
  // sm_86 runs sm_80 cubins: the check passes and loading goes on to the GPU (which CI lacks).
  const Status s = load_with({{0, "Fake A10", 86, 72, 1}}, 0, 80);
  EXPECT_TRUE(s.ok() || s.code() == Error::DeviceError || s.code() == Error::OutOfMemory)
      << s.to_string();
  EXPECT_EQ(s.message().find("was built for"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace baton::cuda
