// Compile-time side of the test_elementwise backend (see testing/test_backend.h): claims float32
// Relu, Add and Mul nodes whose inputs all have the output's shape, and lowers a partition of them
// into a TBE1 blob with compile specs {"nodes": N}.
//
// It builds for the cpu by default, so the programs it makes load and run. Given another device
// ("cuda:1") it stands in for a GPU backend in placement tests, which need no GPU: its blobs then
// say they were built for that device, but nothing can run them there.
#pragma once

#include <optional>

#include "compiler/backend_compiler.h"

namespace baton::testing {

class TestBackendCompiler final : public compiler::BackendCompiler {
 public:
  explicit TestBackendCompiler(Device device = Device::cpu()) : device_(device) {}
  std::string_view id() const override;
  Device device() const override { return device_; }
  bool supports(const compiler::Graph& graph, const compiler::IrNode& node) const override;
  // Relu, Add and Mul only: the optimizer writes no canonical op (a Linear absorbing a Relu, a
  // FusedConv) for a program this backend is a target of, as for any backend without them.
  bool lowers(std::string_view op, std::string_view domain) const override;
  Result<compiler::LoweredPartition> lower(const compiler::Graph& graph,
                                           const compiler::Partition& partition) override;
  // device(), or `misbuilt_for` when set (a backend that built for another device than asked);
  // with `unreadable_blobs` the device cannot be read back.
  Result<Device> blob_device(std::span<const uint8_t> blob) const override;
  bool unreadable_blobs = false;
  std::optional<Device> misbuilt_for;
  int lowered_partitions = 0;

 private:
  Device device_;
};

}  // namespace baton::testing
