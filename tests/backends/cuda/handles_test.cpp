// The CUDA handle owners (handles.h): each handle is destroyed exactly once, by whoever owns it
// last; release() hands it over undestroyed. The ownership logic runs without a GPU through a
// counting kind of handle; the real owners are exercised with a GPU (skipped here otherwise).
#include "backends/cuda/handles.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "baton/cuda/backend.h"
#include "baton/cuda/stream.h"

namespace baton::cuda {
namespace {

std::vector<int>& destroyed() {
  static std::vector<int> ids;
  return ids;
}

struct CountingTraits {
  using Raw = int;  // 0 is "no handle", like nullptr for CUDA's
  static void destroy(int id) { destroyed().push_back(id); }
};
using Counted = Owned<CountingTraits>;

TEST(HandlesTest, EachHandleIsDestroyedOnceByItsLastOwner) {
  destroyed().clear();
  {
    Counted a(1);
    Counted b(std::move(a));
    EXPECT_FALSE(a);
    EXPECT_EQ(b.get(), 1);
    Counted c(2);
    c = std::move(b);  // 2 goes now, 1 moves in
    EXPECT_EQ(destroyed(), std::vector<int>{2});
    EXPECT_EQ(c.get(), 1);
    c = std::move(c);  // self-move keeps it
    EXPECT_EQ(c.get(), 1);
    Counted empty;
    EXPECT_FALSE(empty);
  }
  EXPECT_EQ(destroyed(), (std::vector<int>{2, 1}));
}

TEST(HandlesTest, ReleaseHandsOverAndResetDestroysNow) {
  destroyed().clear();
  Counted a(3);
  EXPECT_EQ(a.release(), 3);
  EXPECT_FALSE(a);
  Counted b(4);
  b.reset();
  EXPECT_EQ(destroyed(), std::vector<int>{4});
  b.reset();  // empty: nothing more
  EXPECT_EQ(destroyed(), std::vector<int>{4});
  Counted c(5, /*device=*/0);  // bound to a device: destroyed even where there is no GPU
  EXPECT_EQ(c.device(), 0);
  c.reset();
  EXPECT_EQ(destroyed(), (std::vector<int>{4, 5}));
}

// With a GPU: memory, events, a cuBLASLt handle and descriptors, a stream, each made and freed on
// its device.
TEST(HandlesTest, RealHandlesOnAGpu) {
  if (devices().empty()) GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  {
    auto buffer = allocate_device_buffer(0, 1 << 20, "a test buffer");
    ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
    EXPECT_TRUE(*buffer);
    EXPECT_EQ(buffer->device(), 0);
    auto event = create_event(0, cudaEventDisableTiming);
    ASSERT_TRUE(event.ok()) << event.status().to_string();
    auto lt = create_cublaslt(0);
    ASSERT_TRUE(lt.ok()) << lt.status().to_string();
    auto desc = create_matmul_desc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    ASSERT_TRUE(desc.ok()) << desc.status().to_string();
    auto layout = create_matrix_layout(CUDA_R_32F, 8, 8, 8);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    auto pref = create_matmul_preference();
    ASSERT_TRUE(pref.ok()) << pref.status().to_string();
    auto stream = Stream::create(0);
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    EXPECT_NE(stream->get(), nullptr);
    Stream moved = std::move(*stream);
    EXPECT_EQ(stream->get(), nullptr);
    EXPECT_EQ(moved.device(), 0);
  }
}

// An allocation too big for the GPU is reported as OutOfMemory naming it. (The failing cudaMalloc
// is real: run_gpu_suite.sh --sanitize runs the *OutOfMemory* tests with API-error reports off.)
TEST(HandlesTest, AnAllocationTooBigIsOutOfMemoryNamingIt) {
  if (devices().empty()) GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  auto huge = allocate_device_buffer(0, uint64_t{1} << 50, "a buffer too big");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.code(), Error::OutOfMemory);
  EXPECT_NE(huge.status().message().find("a buffer too big on cuda:0"), std::string::npos)
      << huge.status().to_string();
}

TEST(HandlesTest, AStreamOnAMissingDeviceIsAnError) {
  auto stream = Stream::create(static_cast<int>(devices().size()) + 3);
  EXPECT_FALSE(stream.ok());
  EXPECT_EQ(stream.code(), Error::DeviceError) << stream.status().to_string();
  // Refused by name before any CUDA call fails.
  EXPECT_NE(stream.status().message().find("does not exist: this machine has"), std::string::npos)
      << stream.status().to_string();
}

}  // namespace
}  // namespace baton::cuda
