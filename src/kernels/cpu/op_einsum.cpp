// ONNX Einsum (opset 12): a loop nest over the equation's labels (ops/einsum.h), output labels
// outside, summed labels inside; each input is read through one stride per label (the sum of its
// strides along repeated labels, 0 along broadcast ellipsis dimensions). Numeric types: floats
// accumulate in double, integers in unsigned 64-bit arithmetic (wrapping, as integer products do).
// A reference kernel, not a fast one: recognized matmul-like equations should become MatMul.
#include <algorithm>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/einsum.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// Loop dimension d (outputs first) has size sizes[d]; input i steps strides[i][d] along it.
struct EinsumLoops {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;
  size_t output_dims = 0;
};

template <typename S>
class EinsumKernel final : public runtime::Kernel {
  static constexpr bool kFloat = !std::is_integral_v<S>;
  using Acc = std::conditional_t<kFloat, double, uint64_t>;

 public:
  EinsumKernel(std::vector<const runtime::Value*> inputs, runtime::Value* out, EinsumLoops loops)
      : inputs_(std::move(inputs)),
        out_(out),
        loops_(std::move(loops)),
        data_(inputs_.size()),
        offsets_(inputs_.size()),
        index_(loops_.sizes.size()) {}

  Status run() override {
    S* y = out_->tensor.data_as<S>();
    const int64_t n_out = out_->tensor.numel();
    if (n_out == 0) return Status::ok_status();
    for (size_t i = 0; i < inputs_.size(); ++i) data_[i] = inputs_[i]->tensor.data_as<const S>();
    const size_t dims = loops_.sizes.size();
    const size_t inputs = inputs_.size();
    bool empty_sum = false;
    for (size_t d = loops_.output_dims; d < dims; ++d)
      empty_sum = empty_sum || loops_.sizes[d] == 0;
    std::fill(index_.begin(), index_.end(), 0);
    std::fill(offsets_.begin(), offsets_.end(), 0);
    for (int64_t o = 0; o < n_out; ++o) {
      Acc acc = 0;
      // The summed dimensions: an odometer below the output's, reset after each output element.
      while (!empty_sum) {
        Acc term = 1;
        for (size_t i = 0; i < inputs; ++i) term = term * value(data_[i][offsets_[i]]);
        acc = acc + term;
        if (!advance(loops_.output_dims)) break;
      }
      y[o] = finish(acc);
      advance_output();
    }
    return Status::ok_status();
  }

 private:
  static Acc value(S v) {
    if constexpr (kFloat) {
      return static_cast<double>(load(v));
    } else {
      return static_cast<Acc>(static_cast<int64_t>(v));  // sign-extended, then modulo 2^64
    }
  }
  static S finish(Acc acc) {
    if constexpr (kFloat) {
      return store<S>(static_cast<compute_t<S>>(acc));
    } else {
      return static_cast<S>(acc);  // modulo 2^bits
    }
  }

  // Steps the odometer over dimensions [first, dims); false (and those counters back at 0) when
  // it wraps around.
  bool advance(size_t first) {
    for (size_t d = loops_.sizes.size(); d-- > first;) {
      if (++index_[d] < loops_.sizes[d]) {
        for (size_t i = 0; i < offsets_.size(); ++i) offsets_[i] += loops_.strides[i][d];
        return true;
      }
      index_[d] = 0;
      for (size_t i = 0; i < offsets_.size(); ++i) {
        offsets_[i] -= loops_.strides[i][d] * (loops_.sizes[d] - 1);
      }
    }
    return false;
  }

  // The next output element: the output dimensions' odometer (summed ones are at 0 already).
  void advance_output() {
    const size_t first = loops_.output_dims;
    for (size_t d = first; d-- > 0;) {
      if (++index_[d] < loops_.sizes[d]) {
        for (size_t i = 0; i < offsets_.size(); ++i) offsets_[i] += loops_.strides[i][d];
        return;
      }
      index_[d] = 0;
      for (size_t i = 0; i < offsets_.size(); ++i) {
        offsets_[i] -= loops_.strides[i][d] * (loops_.sizes[d] - 1);
      }
    }
  }

  std::vector<const runtime::Value*> inputs_;
  runtime::Value* out_;
  EinsumLoops loops_;
  // Scratch sized at create.
  std::vector<const S*> data_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> index_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  std::vector<std::span<const int64_t>> shapes;
  std::vector<const runtime::Value*> inputs;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    shapes.push_back(call.input(i).sizes);
    inputs.push_back(call.inputs[i]);
  }
  BATON_ASSIGN_OR_RETURN(const ops::EinsumPlan plan,
                         ops::plan_einsum(call.attr_string("equation"), shapes, call.describe()));
  // Loop order: output labels, then the others.
  std::vector<int> order = plan.output_labels;
  for (int l = 0; l < static_cast<int>(plan.label_sizes.size()); ++l) {
    if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  }
  EinsumLoops loops;
  loops.output_dims = plan.output_labels.size();
  for (int l : order) loops.sizes.push_back(plan.label_sizes[l]);
  bool empty = false;
  for (const auto& shape : shapes) empty = empty || *checked_numel(shape) == 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    // An empty input leaves nothing to read (strides stay 0).
    const std::vector<int64_t> strides =
        empty ? std::vector<int64_t>(shapes[i].size(), 0) : element_strides(shapes[i]);
    std::vector<int64_t>& per_loop = loops.strides.emplace_back(order.size(), 0);
    for (size_t a = 0; a < shapes[i].size(); ++a) {
      const int label = plan.input_labels[i][a];
      if (shapes[i][a] == 1 && plan.label_sizes[label] != 1) continue;  // broadcast
      const auto d =
          static_cast<size_t>(std::find(order.begin(), order.end(), label) - order.begin());
      per_loop[d] += strides[a];
    }
  }
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kNumericTypes.bits()>(call.input(0).dtype, [&]<typename S>() {
    kernel =
        std::make_unique<EinsumKernel<S>>(std::move(inputs), call.outputs[0], std::move(loops));
  });
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_einsum(runtime::KernelRegistry& registry) {
  registry.add({"Einsum", "", {}, &create});
}

}  // namespace baton::kernels::cpu
