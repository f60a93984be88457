// The activation functions of ONNX's recurrent layers (RNN, GRU, LSTM; ops/rnn.cpp): which
// function each gate applies, per direction, with its alpha and beta.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

enum class RnnActivation : uint8_t {
  Relu,
  Tanh,
  Sigmoid,
  Affine,           // alpha x + beta
  LeakyRelu,        // x < 0: alpha x
  ThresholdedRelu,  // x > alpha: x, else 0
  ScaledTanh,       // alpha tanh(beta x)
  HardSigmoid,      // max(0, min(1, alpha x + beta))
  Elu,              // x < 0: alpha (e^x - 1)
  Softsign,         // x / (1 + |x|)
  Softplus          // log(1 + e^x)
};

struct RnnFunction {
  RnnActivation op = RnnActivation::Tanh;
  double alpha = 0.0, beta = 0.0;
};

// The functions a layer applies, `per_direction` of them for each of `directions` (RNN 1: the
// hidden state's; GRU 2: the gates' f and the candidate's g; LSTM 3: f, g and the output's h),
// forward first. `activations` is the attribute as imported (the names joined by ',', any case;
// empty: the defaults, Tanh for RNN, Sigmoid then Tanh for the others). `alphas` and `betas` are
// consumed in order by the functions that take them (as onnxruntime's GRU and LSTM do); one that
// takes a value the lists have run out of gets its ONNX operator's default, as ONNX says
// (LeakyRelu 0.01, ThresholdedRelu 1, Elu 1, HardSigmoid 0.2 and 0.5), and Affine and ScaledTanh,
// which have none, are errors. (onnxruntime differs there: it uses 0 for ThresholdedRelu,
// Affine and ScaledTanh.) Errors name `what`.
Result<std::vector<RnnFunction>> rnn_functions(std::string_view activations,
                                               const std::vector<double>& alphas,
                                               const std::vector<double>& betas, int per_direction,
                                               int64_t directions, std::string_view what);

double apply(const RnnFunction& f, double x);

}  // namespace baton::ops
