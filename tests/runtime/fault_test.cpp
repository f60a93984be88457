// Faults at load: an allocation that fails (out of memory, injected through the device-allocator
// registry) is an error naming the device and the bytes, leaves nothing allocated behind, and the
// same process loads again once memory is there.
#include <gtest/gtest.h>

#include <map>

#include "baton/baton.h"
#include "baton/core/check.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/program.h"
#include "runtime/cpu_allocator.h"
#include "testing/sample_programs.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

// The CPU allocator, refusing allocations above a limit and counting what is live.
class LimitedAllocator final : public runtime::DeviceAllocator {
 public:
  explicit LimitedAllocator(size_t limit) : limit_(limit) {}
  DeviceType type() const override { return DeviceType::CPU; }
  Result<void*> allocate(Device device, size_t bytes, size_t alignment) override {
    if (bytes > limit_) {
      return BATON_ERROR(OutOfMemory,
                         "cannot allocate {} bytes of host memory on {} (test limit {})", bytes,
                         device.to_string(), limit_);
    }
    BATON_ASSIGN_OR_RETURN(void* p, runtime::cpu_allocator().allocate(device, bytes, alignment));
    live_[p] = bytes;
    return p;
  }
  void deallocate(Device device, void* ptr) override {
    live_.erase(ptr);
    runtime::cpu_allocator().deallocate(device, ptr);
  }
  Status copy(void* dst, Device dst_device, const void* src, Device src_device,
              size_t bytes) override {
    return runtime::cpu_allocator().copy(dst, dst_device, src, src_device, bytes);
  }
  size_t live() const { return live_.size(); }

 private:
  size_t limit_;
  std::map<void*, size_t> live_;
};

TEST(FaultTest, OutOfMemoryAtLoadNamesTheDeviceAndBytesAndTheProcessLoadsAgain) {
  register_builtins();
  testing::register_test_backend();
  const auto p = testing::make_add_relu_program(false);
  auto program = runtime::Program::load_bytes(p.builder.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();

  LimitedAllocator limited(0);  // every arena allocation fails
  runtime::register_device_allocator(&limited);
  auto failed = (*program)->load_method("forward");
  runtime::register_device_allocator(&runtime::cpu_allocator());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), Error::OutOfMemory) << failed.status().to_string();
  const std::string& m = failed.status().message();
  EXPECT_NE(m.find("allocating arena 0"), std::string::npos) << m;
  EXPECT_NE(m.find("bytes on cpu"), std::string::npos) << m;
  EXPECT_EQ(limited.live(), 0u) << "a failed load left memory allocated";

  // Memory is back: the same program loads.
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
}

TEST(FaultTest, AFailureAfterSomeArenasAreAllocatedFreesThem) {
  register_builtins();
  testing::register_test_backend();
  auto p = testing::make_add_relu_program(true);
  // A second delegate that fails in init, after the arenas exist: everything allocated is
  // released.
  const int extra = p.builder.tensor("extra", DType::Float32, {2, 3});
  const auto blob = testing::make_test_blob(1, 1, {}, 0, {{testing::TestOp::Relu, 0, 0, 1}}, 6);
  const int d = p.builder.delegate(testing::kTestBackendId, {{"fail_init", "1"}}, blob, "bad");
  p.builder.delegate_call(d, {p.out}, {extra});
  auto program = runtime::Program::load_bytes(p.builder.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  LimitedAllocator counting(SIZE_MAX);
  runtime::register_device_allocator(&counting);
  auto failed = (*program)->load_method("forward");
  runtime::register_device_allocator(&runtime::cpu_allocator());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(counting.live(), 0u) << "a failed load left arenas allocated";
}

}  // namespace
}  // namespace baton
