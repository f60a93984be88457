// The CUDA engine builder: the compile-time side of the "cuda" backend. Needs no GPU; when the
// GPU the engine is for is present, the engine's GEMM algorithms and cuDNN engines are timed on
// it and recorded in the blob (tuning.h).
//
// A partition becomes an engine blob (engine_format.h): GEMMs go to cuBLASLt with bias and ReLU
// (or tanh-GELU) epilogues fused where the graph allows; runs of elementwise ops become one
// generated kernel; softmax, transpose, concat and precision casts are generated kernels too;
// reshape, flatten, squeeze, unsqueeze and identity are views (no work). All kernels are compiled
// by NVRTC for the target SM architecture into one cubin inside the blob.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/engine_format.h"
#include "baton/cuda/options.h"
#include "compiler/backend_compiler.h"

namespace baton::cuda {

struct EngineTarget {
  int device_id = 0;
  uint32_t sm_arch = 0;  // e.g. 90
  Precision precision = Precision::FP32;
  BuildOptions options;  // recorded in every engine's header
};

class EngineBuilder final : public compiler::BackendCompiler {
 public:
  explicit EngineBuilder(EngineTarget target) : target_(std::move(target)) {}

  std::string_view id() const override { return "cuda"; }
  Device device() const override { return Device::cuda(static_cast<int16_t>(target_.device_id)); }
  bool supports(const compiler::Graph& graph, const compiler::IrNode& node) const override;
  bool lowers(std::string_view op, std::string_view domain) const override;
  // "no CUDA lowering for LSTM", or the node's operands when the lowering refused this form of
  // its op ("the CUDA lowering of TopK does not take this node: inputs int64[8, 100], ...").
  std::string unsupported_reason(const compiler::Graph& graph,
                                 const compiler::IrNode& node) const override;
  // Dynamic engines (builder/dynamic_shapes.h).
  bool supports_dynamic_shapes() const override { return true; }
  Result<compiler::LoweredPartition> lower(const compiler::Graph& graph,
                                           const compiler::Partition& partition) override;
  // Parses the engine blob and returns cuda:<header device_id>.
  Result<Device> blob_device(std::span<const uint8_t> blob) const override;

  const EngineTarget& target() const { return target_; }

 private:
  Result<std::vector<uint8_t>> record_timed_choices(std::vector<uint8_t> blob,
                                                    const std::string& name) const;
  // One engine's (`shared_weights`: a bucket's shared weights, EngineBlob::parse).
  Result<std::vector<uint8_t>> record_engine_choices(std::vector<uint8_t> blob,
                                                     const std::string& name,
                                                     std::span<const uint8_t> shared_weights) const;

  EngineTarget target_;
};

}  // namespace baton::cuda
