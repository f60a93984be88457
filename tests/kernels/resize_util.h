// Kernel::resize tests' shared driver (resize_test.cpp, resize_sequence_test.cpp): one op call
// created at its larger sizes, resized to smaller ones, compared bit for bit with a kernel
// created at the smaller sizes, with no allocation in resize() and run(), then resized back.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"
#include "testing/alloc/counting_allocator.h"

namespace baton::testing {

struct ResizeCase {
  std::string name;
  std::string op;
  std::string domain;
  std::function<void(OpTester&)> attrs;  // sets the call's attributes
  // Builds the inputs for one set of sizes from `rng`: called with big = true, then false.
  std::function<std::vector<HostTensor>(std::mt19937&, bool big)> inputs;
};

inline std::vector<uint8_t> bytes_of(const HostTensor& t) {
  const auto* p = reinterpret_cast<const uint8_t*>(t.storage.data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

inline void check_resize(const ResizeCase& c, runtime::ThreadPool* pool) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(7);
  const std::vector<HostTensor> big = c.inputs(rng, true);
  const std::vector<HostTensor> small = c.inputs(rng, false);

  OpTester resized(c.op, "node_1", kTestOpset, c.domain);
  resized.pool(pool).dynamic();
  c.attrs(resized);
  for (const HostTensor& t : big) resized.input(t);
  ASSERT_TRUE(resized.run().ok());
  const std::vector<uint8_t> big_out = bytes_of(resized.output(0));

  OpTester fresh(c.op, "node_1", kTestOpset, c.domain);
  fresh.pool(pool);
  c.attrs(fresh);
  for (const HostTensor& t : small) fresh.input(t);
  ASSERT_TRUE(fresh.run().ok());

  Status st = resized.resize(small);
  ASSERT_TRUE(st.ok()) << st.message();
  if (counting_available()) {
    // The first run after a resize may warm up a library (OpenBLAS); count the second resize.
    ASSERT_TRUE(resized.rerun().ok());
    CountAllocations count;
    ASSERT_TRUE(resized.kernel()->resize().ok());
    ASSERT_TRUE(resized.rerun().ok());
    EXPECT_EQ(count.count(), 0) << "resize() and run() at the smaller sizes allocated";
  } else {
    ASSERT_TRUE(resized.rerun().ok());
  }
  EXPECT_EQ(resized.output(0).sizes, fresh.output(0).sizes);
  EXPECT_EQ(bytes_of(resized.output(0)), bytes_of(fresh.output(0)))
      << "the resized kernel differs from one created at the smaller sizes";

  st = resized.resize(big);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(resized.rerun().ok());
  EXPECT_EQ(bytes_of(resized.output(0)), big_out) << "resized back, the result changed";
}

// Input k is drawn from its own seed, so that inputs whose sizes do not change (weights, which a
// kernel may pack at create) hold the same values at both shapes.
inline std::vector<HostTensor> floats(std::mt19937&,
                                      std::initializer_list<std::vector<int64_t>> s) {
  std::vector<HostTensor> out;
  uint32_t seed = 100;
  for (const auto& sizes : s) {
    std::mt19937 rng(seed++);
    out.push_back(random_floats(rng, sizes));
  }
  return out;
}

}  // namespace baton::testing
