// ONNX Einsum (opset 12), contracted pairwise (ops::plan_contraction): each input is reduced into
// a dense buffer over the labels that matter beyond it (diagonals taken through summed strides,
// labels only it has summed), then operands are contracted two at a time, the smallest result
// first, each pair as a batched product C[b, l, r] = sum_s A[b, l, s] * B[b, s, r] of copies laid
// out for it, and the last operand is written in the output's order. The work is bounded by the
// inputs, the intermediates and the output, not by the product of every label's size.
// Numeric types: floats accumulate in double, integers in unsigned 64-bit arithmetic (wrapping,
// as integer products do). Every buffer is sized at create.
#include <algorithm>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/einsum.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// A walk over a row-major destination of `sizes` reading a source through `strides` (elements;
// 0 where the source does not vary). Summed dimensions of a reduction come after the destination's
// own: `kept` is how many leading dimensions the destination has.
struct Walk {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  size_t kept = 0;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// dst[o] (+)= each source element the walk visits for destination element o, in order: over the
// kept dimensions (outer) and the summed ones (inner). `index` is scratch of sizes.size().
template <typename Acc, typename Load>
void walk(const Walk& w, Load&& load, Acc* dst, std::vector<int64_t>& index) {
  const size_t dims = w.sizes.size();
  for (int64_t s : w.sizes) {
    if (s == 0) {
      // Nothing to read: an empty destination, or sums over nothing (zero).
      int64_t out = 1;
      for (size_t d = 0; d < w.kept; ++d) out *= w.sizes[d];
      std::fill(dst, dst + out, Acc(0));
      return;
    }
  }
  std::fill(index.begin(), index.end(), 0);
  int64_t offset = 0, o = 0;
  Acc acc = 0;
  while (true) {
    acc = acc + load(offset);
    size_t d = dims;
    bool done = true;
    while (d-- > 0) {
      if (d < w.kept && d + 1 == w.kept) {
        // Leaving the summed dimensions: the destination element is complete.
        dst[o++] = acc;
        acc = 0;
      }
      if (++index[d] < w.sizes[d]) {
        offset += w.strides[d];
        done = false;
        break;
      }
      offset -= w.strides[d] * (w.sizes[d] - 1);
      index[d] = 0;
    }
    if (done) {
      if (w.kept == 0) dst[0] = acc;
      return;
    }
  }
}

// Row-major strides of a dense operand over `labels`, looked up by label.
std::vector<int64_t> label_strides(const std::vector<int>& labels,
                                   const std::vector<int64_t>& label_sizes) {
  std::vector<int64_t> by_label(label_sizes.size(), 0);
  int64_t stride = 1;
  for (size_t i = labels.size(); i-- > 0;) {
    by_label[labels[i]] = stride;
    stride *= label_sizes[labels[i]];
  }
  return by_label;
}

// A walk that copies a dense operand over `from` into the dense order `groups` (concatenated).
Walk permute(const std::vector<int>& from, std::vector<std::vector<int>> groups,
             const std::vector<int64_t>& label_sizes) {
  const std::vector<int64_t> strides = label_strides(from, label_sizes);
  Walk w;
  for (const auto& g : groups) {
    for (int l : g) {
      w.sizes.push_back(label_sizes[l]);
      w.strides.push_back(strides[l]);
    }
  }
  w.kept = w.sizes.size();
  return w;
}

int64_t volume(const std::vector<int>& labels, const std::vector<int64_t>& label_sizes) {
  int64_t v = 1;
  for (int l : labels) v *= label_sizes[l];
  return v;
}

struct ReduceStep {
  Walk walk;  // over the input's elements
  size_t input = 0;
};
struct PairStep {
  size_t a = 0, b = 0;  // operand buffers (indices into the kernel's buffer list)
  size_t out = 0;       // the result's buffer
  Walk to_a, to_b;      // A -> [batch, left, summed], B -> [batch, summed, right]
  int64_t nb = 1, nl = 1, ns = 1, nr = 1;
};
struct EinsumSteps {
  std::vector<ReduceStep> reduces;  // reduce i writes buffer i
  std::vector<PairStep> pairs;
  size_t last = 0;  // the buffer the output is read from
  Walk to_output;   // last buffer -> the output's order
  std::vector<int64_t> buffer_sizes;
  int64_t pack_a = 0, pack_b = 0;  // the largest laid-out copies
  size_t max_dims = 0;
};

EinsumSteps make_steps(const ops::EinsumPlan& plan, const ops::EinsumContraction& c,
                       std::span<const std::span<const int64_t>> shapes) {
  const std::vector<int64_t>& sizes = plan.label_sizes;
  EinsumSteps s;
  std::vector<size_t> list;  // operand position -> buffer
  std::vector<std::vector<int>> list_labels;
  for (size_t i = 0; i < c.reduces.size(); ++i) {
    const ops::EinsumContraction::Reduce& r = c.reduces[i];
    // The input's strides per label (summed over its repeated labels: a diagonal).
    std::vector<int64_t> by_label(sizes.size(), 0);
    const std::vector<int64_t> strides = element_strides(shapes[i]);
    bool empty = false;
    for (int64_t d : shapes[i]) empty = empty || d == 0;
    for (size_t a = 0; a < shapes[i].size(); ++a) {
      const int l = plan.input_labels[i][a];
      if (shapes[i][a] == 1 && sizes[l] != 1) continue;
      if (!empty) by_label[l] += strides[a];
    }
    ReduceStep step;
    step.input = i;
    for (int l : r.kept) {
      step.walk.sizes.push_back(sizes[l]);
      step.walk.strides.push_back(by_label[l]);
    }
    step.walk.kept = r.kept.size();
    for (int l : r.labels) {
      if (std::find(r.kept.begin(), r.kept.end(), l) != r.kept.end()) continue;
      step.walk.sizes.push_back(sizes[l]);
      step.walk.strides.push_back(by_label[l]);
    }
    s.max_dims = std::max(s.max_dims, step.walk.sizes.size());
    s.reduces.push_back(std::move(step));
    s.buffer_sizes.push_back(volume(r.kept, sizes));
    list.push_back(i);
    list_labels.push_back(r.kept);
  }
  for (const ops::EinsumContraction::Pair& p : c.pairs) {
    PairStep step;
    step.a = list[p.a];
    step.b = list[p.b];
    step.to_a = permute(list_labels[p.a], {p.batch, p.left, p.summed}, sizes);
    step.to_b = permute(list_labels[p.b], {p.batch, p.summed, p.right}, sizes);
    step.nb = volume(p.batch, sizes);
    step.nl = volume(p.left, sizes);
    step.ns = volume(p.summed, sizes);
    step.nr = volume(p.right, sizes);
    s.max_dims = std::max({s.max_dims, step.to_a.sizes.size(), step.to_b.sizes.size()});
    s.pack_a = std::max(s.pack_a, step.to_a.count());
    s.pack_b = std::max(s.pack_b, step.to_b.count());
    step.out = s.buffer_sizes.size();
    s.buffer_sizes.push_back(step.nb * step.nl * step.nr);
    std::vector<int> result = p.batch;
    result.insert(result.end(), p.left.begin(), p.left.end());
    result.insert(result.end(), p.right.begin(), p.right.end());
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(p.b));
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(p.a));
    list_labels.erase(list_labels.begin() + static_cast<std::ptrdiff_t>(p.b));
    list_labels.erase(list_labels.begin() + static_cast<std::ptrdiff_t>(p.a));
    list.push_back(step.out);
    list_labels.push_back(std::move(result));
    s.pairs.push_back(std::move(step));
  }
  s.last = list.front();
  // Output labels the last operand lacks have size 1 (every input broadcast them): stride 0.
  const std::vector<int64_t> strides = label_strides(list_labels.front(), sizes);
  for (int l : plan.output_labels) {
    s.to_output.sizes.push_back(sizes[l]);
    const bool has = std::find(list_labels.front().begin(), list_labels.front().end(), l) !=
                     list_labels.front().end();
    s.to_output.strides.push_back(has ? strides[l] : 0);
  }
  s.to_output.kept = s.to_output.sizes.size();
  s.max_dims = std::max(s.max_dims, s.to_output.sizes.size());
  return s;
}

template <typename S>
class EinsumKernel final : public runtime::Kernel {
  static constexpr bool kFloat = !std::is_integral_v<S>;
  using Acc = std::conditional_t<kFloat, double, uint64_t>;

 public:
  EinsumKernel(std::vector<const runtime::Value*> inputs, runtime::Value* out, EinsumSteps steps)
      : inputs_(std::move(inputs)), out_(out), s_(std::move(steps)) {}

  // The scratch: each operand and intermediate in the accumulation type, the two operands of a
  // product rearranged, and the output before its conversion.
  Status reserve(const runtime::KernelCall& call) {
    buffers_.resize(s_.buffer_sizes.size());
    for (size_t i = 0; i < buffers_.size(); ++i) {
      BATON_TRY(call.reserve_scratch<Acc>(buffers_[i], static_cast<uint64_t>(s_.buffer_sizes[i]),
                                          "einsum intermediate"));
    }
    BATON_TRY(call.reserve_scratch<Acc>(pack_a_, static_cast<uint64_t>(s_.pack_a),
                                        "einsum operand copy"));
    BATON_TRY(call.reserve_scratch<Acc>(pack_b_, static_cast<uint64_t>(s_.pack_b),
                                        "einsum operand copy"));
    BATON_TRY(size_buffer(index_, s_.max_dims, call, "einsum index"));
    BATON_TRY(call.reserve_scratch<Acc>(out_buffer_, static_cast<uint64_t>(out_->tensor.numel()),
                                        "einsum output in the accumulation type"));
    return Status::ok_status();
  }

  Status run() override {
    if (out_->tensor.numel() == 0) return Status::ok_status();
    for (const ReduceStep& r : s_.reduces) {
      const S* x = inputs_[r.input]->tensor.data_as<const S>();
      walk<Acc>(
          r.walk, [x](int64_t o) { return value(x[o]); }, buffers_[r.input].data<Acc>(), index_);
    }
    for (const PairStep& p : s_.pairs) {
      const Acc* a = buffers_[p.a].data<Acc>();
      const Acc* b = buffers_[p.b].data<Acc>();
      walk<Acc>(
          p.to_a, [a](int64_t o) { return a[o]; }, pack_a_.data<Acc>(), index_);
      walk<Acc>(
          p.to_b, [b](int64_t o) { return b[o]; }, pack_b_.data<Acc>(), index_);
      Acc* c = buffers_[p.out].data<Acc>();
      std::fill(c, c + p.nb * p.nl * p.nr, Acc(0));
      // A batched product with the right operand's rows innermost (contiguous, vectorizable).
      for (int64_t bi = 0; bi < p.nb; ++bi) {
        const Acc* ab = pack_a_.data<Acc>() + bi * p.nl * p.ns;
        const Acc* bb = pack_b_.data<Acc>() + bi * p.ns * p.nr;
        Acc* cb = c + bi * p.nl * p.nr;
        for (int64_t l = 0; l < p.nl; ++l) {
          Acc* row = cb + l * p.nr;
          for (int64_t k = 0; k < p.ns; ++k) {
            const Acc x = ab[l * p.ns + k];
            const Acc* brow = bb + k * p.nr;
            for (int64_t r = 0; r < p.nr; ++r) row[r] = row[r] + x * brow[r];
          }
        }
      }
    }
    const Acc* last = buffers_[s_.last].data<Acc>();
    S* y = out_->tensor.data_as<S>();
    // The last operand in the output's order, then converted to the output's type.
    const int64_t n = out_->tensor.numel();
    walk<Acc>(
        s_.to_output, [last](int64_t o) { return last[o]; }, out_buffer_.data<Acc>(), index_);
    const Acc* acc = out_buffer_.data<Acc>();
    for (int64_t i = 0; i < n; ++i) y[i] = finish(acc[i]);
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

  std::vector<const runtime::Value*> inputs_;
  runtime::Value* out_;
  EinsumSteps s_;
  // Reserved at create.
  std::vector<runtime::ScratchRef> buffers_;
  runtime::ScratchRef pack_a_, pack_b_, out_buffer_;
  std::vector<int64_t> index_;  // the walk's position, one entry per dimension
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
  EinsumSteps steps = make_steps(plan, ops::plan_contraction(plan, shapes), shapes);
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kNumericTypes.bits()>(call.input(0).dtype, [&]<typename S>() {
    kernel = with_scratch(
        std::make_unique<EinsumKernel<S>>(std::move(inputs), call.outputs[0], std::move(steps)),
        call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_einsum(runtime::KernelRegistry& registry) {
  registry.add({"Einsum", "", {}, &create});
}

}  // namespace baton::kernels::cpu
