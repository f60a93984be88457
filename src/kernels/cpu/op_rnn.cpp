// ONNX RNN, GRU and LSTM (ops/rnn.cpp), with any of ONNX's activations (ops/rnn.h): each
// direction walks each
// sequence of the batch step by step, its gates computed as plain dot products in double (the
// layers are small; speed is not this kernel's point yet). A sequence shorter than the input
// (sequence_lens) stops at its length: its later Y rows are 0 and Y_h (Y_c) is its state at its
// last step; the reverse direction starts from that last step. State buffers are made at create,
// so run() allocates nothing; the batch and the sequence length are read from X on every call, so
// one kernel serves every shape of a dynamic program.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"
#include "ops/rnn.h"

namespace baton::kernels::cpu {
namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Setup {
  Cell cell = Cell::Rnn;
  int gates = 1;
  int64_t dirs = 1, hidden = 0, input = 0;
  bool reverse_only = false, layout1 = false, linear_before_reset = false, input_forget = false;
  // Per direction, its functions in ONNX's order: RNN f; GRU f (gates), g (candidate); LSTM f
  // (gates), g (cell input), h (cell output).
  std::vector<ops::RnnFunction> fns;
  // `clip`: the gates' and the candidates' pre-activations (LSTM's gates after their peepholes)
  // are bounded to [-clip, clip] before their functions; infinity when absent.
  double clip = 0.0;
};

template <typename S>
class RnnKernel final : public runtime::Kernel {
 public:
  RnnKernel(const runtime::KernelCall& call, Setup s) : s_(s) {
    for (size_t i = 0; i < 8; ++i) in_[i] = call.has_input(i) ? call.inputs[i] : nullptr;
    for (size_t o = 0; o < 3; ++o) {
      out_[o] =
          o < call.outputs.size() && call.outputs[o] != nullptr && call.outputs[o]->is_tensor()
              ? call.outputs[o]
              : nullptr;
    }
    const auto n = static_cast<size_t>(s_.hidden);
    h_.resize(n);
    c_.resize(n);
    g_.resize(static_cast<size_t>(s_.gates) * n);
    rh_.resize(n);
  }

  // Dynamic shapes: the batch and the sequence length are read from X on every call (the state
  // buffers depend only on the hidden size), so a change of shape needs nothing here.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

  Status run() override {
    const S* x = data(0);
    const S* w = data(1);
    const S* r = data(2);
    const S* b = data(3);
    const auto* lens = in_[4] ? static_cast<const int32_t*>(in_[4]->tensor.data) : nullptr;
    const S* h0 = data(5);
    const S* c0 = s_.cell == Cell::Lstm ? data(6) : nullptr;
    const S* p = s_.cell == Cell::Lstm ? data(7) : nullptr;
    S* y = out_[0] ? static_cast<S*>(out_[0]->tensor.data) : nullptr;
    S* yh = out_[1] ? static_cast<S*>(out_[1]->tensor.data) : nullptr;
    S* yc = out_[2] ? static_cast<S*>(out_[2]->tensor.data) : nullptr;
    const auto& xs = in_[0]->tensor.sizes;  // this call's sizes (dynamic shapes)
    const int64_t T = s_.layout1 ? xs[1] : xs[0], B = s_.layout1 ? xs[0] : xs[1];
    const int64_t H = s_.hidden, G = s_.gates, I = s_.input;
    if (y != nullptr) std::fill(y, y + out_[0]->tensor.numel(), S(0));
    // Element offsets: X (t, b, i); Y (t, d, b, j); a state (d, b, j).
    auto x_at = [&](int64_t t, int64_t bb) {
      return s_.layout1 ? (bb * T + t) * I : (t * B + bb) * I;
    };
    auto y_at = [&](int64_t t, int64_t d, int64_t bb) {
      return s_.layout1 ? ((bb * T + t) * s_.dirs + d) * H : ((t * s_.dirs + d) * B + bb) * H;
    };
    auto state_at = [&](int64_t d, int64_t bb) {
      return s_.layout1 ? (bb * s_.dirs + d) * H : (d * B + bb) * H;
    };
    for (int64_t d = 0; d < s_.dirs; ++d) {
      const bool reverse = s_.reverse_only || d == 1;
      const S* wd = w + d * G * H * I;
      const S* rd = r + d * G * H * H;
      const S* wb = b ? b + d * 2 * G * H : nullptr;
      const S* rb = b ? wb + G * H : nullptr;
      const S* pd = p ? p + d * 3 * H : nullptr;
      const int per_direction = s_.cell == Cell::Rnn ? 1 : s_.cell == Cell::Gru ? 2 : 3;
      const ops::RnnFunction& f = s_.fns[d * per_direction];
      const ops::RnnFunction& g = s_.fns[d * per_direction + std::min(1, per_direction - 1)];
      const ops::RnnFunction& hf = s_.fns[d * per_direction + per_direction - 1];
      const double clip = s_.clip;
      auto act = [clip](const ops::RnnFunction& fn, double v) {
        return ops::apply(fn, std::clamp(v, -clip, clip));
      };
      for (int64_t bb = 0; bb < B; ++bb) {
        const int64_t len = lens ? std::clamp<int64_t>(lens[bb], 0, T) : T;
        for (int64_t j = 0; j < H; ++j) {
          h_[j] = h0 ? static_cast<double>(h0[state_at(d, bb) + j]) : 0.0;
          c_[j] = c0 ? static_cast<double>(c0[state_at(d, bb) + j]) : 0.0;
        }
        for (int64_t step = 0; step < len; ++step) {
          const int64_t t = reverse ? len - 1 - step : step;
          const S* xt = x + x_at(t, bb);
          // g_[k * H + j]: gate k's input part (W x + Wb), and R h + Rb where the cell adds it.
          for (int64_t k = 0; k < G; ++k) {
            for (int64_t j = 0; j < H; ++j) {
              const int64_t row = k * H + j;
              double v = wb ? static_cast<double>(wb[row]) : 0.0;
              const S* wr = wd + row * I;
              for (int64_t i = 0; i < I; ++i) v += static_cast<double>(wr[i]) * xt[i];
              // GRU's candidate gate (k = 2) takes its recurrent part below.
              if (!(s_.cell == Cell::Gru && k == 2)) {
                v += rb ? static_cast<double>(rb[row]) : 0.0;
                const S* rr = rd + row * H;
                for (int64_t i = 0; i < H; ++i) v += static_cast<double>(rr[i]) * h_[i];
              }
              g_[row] = v;
            }
          }
          if (s_.cell == Cell::Rnn) {
            for (int64_t j = 0; j < H; ++j) h_[j] = act(f, g_[j]);
          } else if (s_.cell == Cell::Gru) {
            // z, r, then the candidate h with r applied before or after R.
            for (int64_t j = 0; j < H; ++j) {
              g_[j] = act(f, g_[j]);
              g_[H + j] = act(f, g_[H + j]);
            }
            for (int64_t j = 0; j < H; ++j) {
              const int64_t row = 2 * H + j;
              const S* rr = rd + row * H;
              double rec = 0;
              if (s_.linear_before_reset) {
                for (int64_t i = 0; i < H; ++i) rec += static_cast<double>(rr[i]) * h_[i];
                rec = g_[H + j] * (rec + (rb ? static_cast<double>(rb[row]) : 0.0));
              } else {
                for (int64_t i = 0; i < H; ++i)
                  rec += static_cast<double>(rr[i]) * g_[H + i] * h_[i];
                rec += rb ? static_cast<double>(rb[row]) : 0.0;
              }
              rh_[j] = act(g, g_[row] + rec);
            }
            for (int64_t j = 0; j < H; ++j) h_[j] = (1.0 - g_[j]) * rh_[j] + g_[j] * h_[j];
          } else {
            // i, o, f, c; the peepholes read the previous cell state (i, f) and the new one (o).
            for (int64_t j = 0; j < H; ++j) {
              const double ig = act(f, g_[j] + (pd ? pd[j] * c_[j] : 0.0));
              const double fg = s_.input_forget
                                    ? 1.0 - ig
                                    : act(f, g_[2 * H + j] + (pd ? pd[2 * H + j] * c_[j] : 0.0));
              const double cand = act(g, g_[3 * H + j]);
              c_[j] = fg * c_[j] + ig * cand;
              const double og = act(f, g_[H + j] + (pd ? pd[H + j] * c_[j] : 0.0));
              // The cell state reaches its output function unclipped, as onnxruntime computes it
              // (ONNX says only that clip bounds the activations' inputs).
              h_[j] = og * ops::apply(hf, c_[j]);
            }
          }
          if (y != nullptr) {
            S* yt = y + y_at(t, d, bb);
            for (int64_t j = 0; j < H; ++j) yt[j] = static_cast<S>(h_[j]);
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          if (yh != nullptr) yh[state_at(d, bb) + j] = static_cast<S>(h_[j]);
          if (yc != nullptr) yc[state_at(d, bb) + j] = static_cast<S>(c_[j]);
        }
      }
    }
    return Status::ok_status();
  }

 private:
  const S* data(size_t i) const {
    return in_[i] ? static_cast<const S*>(in_[i]->tensor.data) : nullptr;
  }

  Setup s_;
  const runtime::Value* in_[8] = {};
  runtime::Value* out_[3] = {};
  std::vector<double> h_, c_, g_, rh_;
};

template <Cell kCell>
Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  Setup s;
  s.cell = kCell;
  s.gates = kCell == Cell::Rnn ? 1 : kCell == Cell::Gru ? 3 : 4;
  const std::string_view direction = call.attr_string("direction");
  s.dirs = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  s.layout1 = call.def->attr_index("layout") >= 0 && call.attr_int("layout") == 1;
  const auto x = call.input(0).sizes;
  s.input = x[2];
  s.hidden = call.input(2).sizes[2];
  if constexpr (kCell == Cell::Gru)
    s.linear_before_reset = call.attr_int("linear_before_reset") != 0;
  if constexpr (kCell == Cell::Lstm) s.input_forget = call.attr_int("input_forget") != 0;
  const std::span<const double> alphas = call.attr_floats("activation_alpha"),
                                betas = call.attr_floats("activation_beta");
  BATON_ASSIGN_OR_RETURN(s.fns,
                         ops::rnn_functions(call.attr_string("activations"),
                                            std::vector<double>(alphas.begin(), alphas.end()),
                                            std::vector<double>(betas.begin(), betas.end()),
                                            s.gates == 1   ? 1
                                            : s.gates == 3 ? 2
                                                           : 3,
                                            s.dirs, call.describe()));
  s.clip = call.attr("clip").is_none() ? std::numeric_limits<double>::infinity()
                                       : call.attr_float("clip");
  std::unique_ptr<runtime::Kernel> kernel;
  const bool typed = dispatch<DTypeSet{DType::Float32, DType::Float64}.bits()>(
      call.input(0).dtype, [&]<typename S>() { kernel = std::make_unique<RnnKernel<S>>(call, s); });
  BATON_CHECK_OR_RETURN(typed, NotSupported, "{}: dtype {} is not taken here", call.describe(),
                        dtype_name(call.input(0).dtype));
  return kernel;
}

}  // namespace

void register_rnn(runtime::KernelRegistry& registry) {
  registry.add({"RNN", "", {}, &create<Cell::Rnn>});
  registry.add({"GRU", "", {}, &create<Cell::Gru>});
  registry.add({"LSTM", "", {}, &create<Cell::Lstm>});
}

}  // namespace baton::kernels::cpu
