// Compile-time side of the test_elementwise backend (see testing/test_backend.h): claims float32
// Relu, Add and Mul nodes whose inputs all have the output's shape, and lowers a partition of them
// into a TBE1 blob with compile specs {"target_device": "cpu", "nodes": N}.
#pragma once

#include "compiler/backend_compiler.h"

namespace baton::testing {

class TestBackendCompiler final : public compiler::BackendCompiler {
 public:
  std::string_view id() const override;
  bool supports(const compiler::Graph& graph, const compiler::IrNode& node) const override;
  Result<compiler::LoweredPartition> lower(const compiler::Graph& graph,
                                           const compiler::Partition& partition) override;
  // Test blobs run on the cpu; with `unreadable_blobs` the device cannot be read back.
  Result<Device> blob_device(std::span<const uint8_t> blob) const override;
  bool unreadable_blobs = false;
  int lowered_partitions = 0;
};

}  // namespace baton::testing
