// ScratchPlan (runtime/scratch.h) on its own: the layout of reservations, the shared size, and the
// error paths a kernel's create can reach.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/scratch.h"

namespace baton::runtime {
namespace {

TEST(ScratchPlan, KernelsShareTheLargestNeedAndPiecesAreAligned) {
  ScratchPlan plan;
  ScratchRef a, b, c;
  plan.begin_kernel("first");
  ASSERT_TRUE(plan.reserve(a, 10, 4, 1, "a").ok());  // 40 bytes, rounded to 64
  ASSERT_TRUE(plan.reserve(b, 3, 8, 2, "b").ok());   // two slots of 64
  plan.begin_kernel("second");
  ASSERT_TRUE(plan.reserve(c, 100, 1, 1, "c").ok());  // 128
  EXPECT_EQ(plan.kernels()[0].bytes, 64u + 128u);
  EXPECT_EQ(plan.kernels()[1].bytes, 128u);
  EXPECT_EQ(plan.bytes(), 192u);
  EXPECT_EQ(a.data<float>(), nullptr) << "no memory before allocate";
  ASSERT_TRUE(plan.allocate().ok());
  const auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  EXPECT_EQ(at(a.data<float>()) % ScratchPlan::kAlignment, 0u);
  EXPECT_EQ(at(b.data<double>(0)) - at(a.data<float>()), 64u);
  EXPECT_EQ(at(b.data<double>(1)) - at(b.data<double>(0)), 64u);
  EXPECT_EQ(c.data<char>(), a.data<char>()) << "the second kernel starts at the area's start";
}

TEST(ScratchPlan, ASizeBeyond64BitsIsOutOfMemoryNamingKernelAndBuffer) {
  ScratchPlan plan;
  ScratchRef ref;
  plan.begin_kernel("Attention (node 'att')");
  const Status st = plan.reserve(ref, uint64_t{1} << 62, 8, 1, "attention scores");
  EXPECT_EQ(st.code(), Error::OutOfMemory) << st.to_string();
  EXPECT_NE(st.message().find("Attention (node 'att')"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("attention scores"), std::string::npos) << st.to_string();
  // Per-thread slots that overflow only once multiplied.
  const Status slots = plan.reserve(ref, uint64_t{1} << 40, 1, uint64_t{1} << 30, "per thread");
  EXPECT_EQ(slots.code(), Error::OutOfMemory) << slots.to_string();
  EXPECT_EQ(plan.bytes(), 0u) << "a refused reservation reserves nothing";
}

TEST(ScratchPlan, AReservationOutsideACreateIsAnInternalError) {
  ScratchPlan plan;
  ScratchRef ref;
  EXPECT_EQ(plan.reserve(ref, 1, 4, 1, "early").code(), Error::Internal);
  plan.begin_kernel("k");
  ASSERT_TRUE(plan.reserve(ref, 1, 4, 1, "x").ok());
  ASSERT_TRUE(plan.allocate().ok());
  EXPECT_EQ(plan.reserve(ref, 1, 4, 1, "late").code(), Error::Internal);
}

}  // namespace
}  // namespace baton::runtime
