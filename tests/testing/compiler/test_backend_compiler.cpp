#include "testing/compiler/test_backend_compiler.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "baton/core/check.h"
#include "testing/test_backend.h"

namespace baton::testing {

std::string_view TestBackendCompiler::id() const { return kTestBackendId; }

bool TestBackendCompiler::lowers(std::string_view op, std::string_view domain) const {
  return domain.empty() && (op == "Relu" || op == "Add" || op == "Mul");
}

bool TestBackendCompiler::supports(const compiler::Graph& graph,
                                   const compiler::IrNode& node) const {
  if (!node.domain.empty()) return false;
  if (node.op_type != "Relu" && node.op_type != "Add" && node.op_type != "Mul") return false;
  if (node.outputs.size() != 1 || node.outputs[0] < 0) return false;
  const compiler::IrValue& out = graph.values[node.outputs[0]];
  if (out.dtype != DType::Float32) return false;
  for (int in : node.inputs) {
    if (in < 0 || graph.values[in].sizes != out.sizes || graph.values[in].dtype != DType::Float32) {
      return false;
    }
  }
  return true;
}

Result<compiler::LoweredPartition> TestBackendCompiler::lower(const compiler::Graph& graph,
                                                              const compiler::Partition& p) {
  const auto& first = graph.values[graph.nodes[p.nodes[0]].outputs[0]];
  const auto numel = checked_numel(first.sizes);
  std::map<int, int32_t> slot;
  int32_t next = 0;
  for (int v : p.inputs) slot[v] = next++;
  std::vector<std::vector<float>> constants;
  for (int n : p.nodes) {
    for (int v : graph.nodes[n].inputs) {
      const compiler::IrValue& iv = graph.values[v];
      BATON_CHECK_OR_RETURN(iv.sizes == first.sizes, NotSupported,
                            "test backend partitions need one shape throughout");
      if (iv.constant && !slot.count(v)) {
        std::vector<float> data(static_cast<size_t>(*numel));
        std::memcpy(data.data(), iv.constant->data(), data.size() * 4);
        constants.push_back(std::move(data));
        slot[v] = next++;
      }
    }
  }
  uint32_t temps = 0;
  const int32_t temp_base = next;
  for (int n : p.nodes) {
    const int v = graph.nodes[n].outputs[0];
    const bool is_output = std::find(p.outputs.begin(), p.outputs.end(), v) != p.outputs.end();
    if (!is_output) slot[v] = temp_base + static_cast<int32_t>(temps++);
  }
  const int32_t out_base = temp_base + static_cast<int32_t>(temps);
  for (size_t o = 0; o < p.outputs.size(); ++o)
    slot[p.outputs[o]] = out_base + static_cast<int32_t>(o);
  std::vector<TestBlobOp> ops;
  for (int n : p.nodes) {
    const compiler::IrNode& node = graph.nodes[n];
    TestBlobOp op{};
    op.code = node.op_type == "Relu"  ? TestOp::Relu
              : node.op_type == "Add" ? TestOp::Add
                                      : TestOp::Mul;
    op.a = slot.at(node.inputs[0]);
    op.b = node.inputs.size() > 1 ? slot.at(node.inputs[1]) : 0;
    op.out = slot.at(node.outputs[0]);
    ops.push_back(op);
  }
  compiler::LoweredPartition lp;
  lp.blob = make_test_blob(static_cast<uint32_t>(p.inputs.size()),
                           static_cast<uint32_t>(p.outputs.size()), constants, temps, ops,
                           static_cast<uint64_t>(*numel));
  const std::string count = std::to_string(p.nodes.size());
  lp.compile_specs.push_back({"nodes", std::vector<uint8_t>(count.begin(), count.end())});
  ++lowered_partitions;
  return lp;
}

Result<Device> TestBackendCompiler::blob_device(std::span<const uint8_t> blob) const {
  BATON_CHECK_OR_RETURN(!unreadable_blobs && blob.size() >= 4 && blob[0] == 'T', InvalidProgram,
                        "not a TBE1 blob");
  return misbuilt_for.value_or(device_);
}

}  // namespace baton::testing
