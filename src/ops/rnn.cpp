// ONNX RNN, GRU and LSTM (opsets 7 and 14; 14 adds `layout`): a recurrent layer over the sequence
// of X, in one direction, the other, or both. X is [seq, batch, input] (layout 0) or [batch, seq,
// input] (layout 1); W [directions, G * hidden, input], R [directions, G * hidden, hidden] with G
// gates (RNN 1, GRU 3 in z, r, h order, LSTM 4 in i, o, f, c order); B [directions, 2 * G *
// hidden] (W's biases, then R's); sequence_lens [batch]; initial_h (and LSTM's initial_c)
// [directions, batch, hidden] ([batch, directions, hidden] with layout 1); LSTM's peepholes P
// [directions, 3 * hidden] (i, o, f). Outputs: Y [seq, directions, batch, hidden] (layout 1:
// [batch, seq, directions, hidden]), Y_h (and LSTM's Y_c) shaped like initial_h.
//
// `activations` (with activation_alpha and activation_beta) chooses each gate's function among
// ONNX's list (ops/rnn.h); the importer carries the list of names as one string joined by ','.
// `clip` bounds the pre-activations (kernels/cpu/op_rnn.cpp says which ones).
#include "ops/rnn.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {

namespace {

struct ActivationName {
  const char* name;  // lower case
  RnnActivation op;
  bool alpha, beta;  // which values it takes
  double default_alpha, default_beta;
  bool has_default;
};

// NaN: no default (Affine, ScaledTanh).
constexpr ActivationName kActivations[] = {
    {"relu", RnnActivation::Relu, false, false, 0, 0, true},
    {"tanh", RnnActivation::Tanh, false, false, 0, 0, true},
    {"sigmoid", RnnActivation::Sigmoid, false, false, 0, 0, true},
    {"affine", RnnActivation::Affine, true, true, 0, 0, false},
    {"leakyrelu", RnnActivation::LeakyRelu, true, false, 0.01, 0, true},
    {"thresholdedrelu", RnnActivation::ThresholdedRelu, true, false, 1.0, 0, true},
    {"scaledtanh", RnnActivation::ScaledTanh, true, true, 0, 0, false},
    {"hardsigmoid", RnnActivation::HardSigmoid, true, true, 0.2, 0.5, true},
    {"elu", RnnActivation::Elu, true, false, 1.0, 0, true},
    {"softsign", RnnActivation::Softsign, false, false, 0, 0, true},
    {"softplus", RnnActivation::Softplus, false, false, 0, 0, true},
};

}  // namespace

Result<std::vector<RnnFunction>> rnn_functions(std::string_view activations,
                                               const std::vector<double>& alphas,
                                               const std::vector<double>& betas, int per_direction,
                                               int64_t directions, std::string_view what) {
  std::vector<std::string> names;
  if (activations.empty()) {
    const std::vector<std::string> one = per_direction == 1
                                             ? std::vector<std::string>{"tanh"}
                                             : std::vector<std::string>{"sigmoid", "tanh", "tanh"};
    for (int64_t d = 0; d < directions; ++d)
      names.insert(names.end(), one.begin(), one.begin() + per_direction);
  } else {
    size_t start = 0;
    while (true) {
      const size_t comma = activations.find(',', start);
      names.emplace_back(activations.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  BATON_CHECK_OR_RETURN(
      names.size() == static_cast<size_t>(per_direction * directions), InvalidArgument,
      "{}: 'activations' lists {} function(s); this layer needs {} per direction, {} in all", what,
      names.size(), per_direction, per_direction * directions);
  size_t next_alpha = 0, next_beta = 0;
  std::vector<RnnFunction> out;
  for (const std::string& given : names) {
    std::string lower = given;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const ActivationName* a = nullptr;
    for (const ActivationName& n : kActivations) {
      if (lower == n.name) a = &n;
    }
    BATON_CHECK_OR_RETURN(a != nullptr, NotSupported,
                          "{}: activation '{}' is not one of ONNX's recurrent activations (Relu, "
                          "Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                          "HardSigmoid, Elu, Softsign, Softplus)",
                          what, given);
    RnnFunction f;
    f.op = a->op;
    f.alpha = a->default_alpha;
    f.beta = a->default_beta;
    const bool missing =
        (a->alpha && next_alpha >= alphas.size()) || (a->beta && next_beta >= betas.size());
    BATON_CHECK_OR_RETURN(a->has_default || !missing, InvalidArgument,
                          "{}: activation '{}' needs its alpha and beta from "
                          "'activation_alpha' and 'activation_beta' (which ran out)",
                          what, given);
    if (a->alpha && next_alpha < alphas.size()) f.alpha = alphas[next_alpha++];
    if (a->beta && next_beta < betas.size()) f.beta = betas[next_beta++];
    out.push_back(f);
  }
  return out;
}

double apply(const RnnFunction& f, double x) {
  switch (f.op) {
    case RnnActivation::Relu:
      return x > 0.0 ? x : 0.0;
    case RnnActivation::Tanh:
      return std::tanh(x);
    case RnnActivation::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case RnnActivation::Affine:
      return f.alpha * x + f.beta;
    case RnnActivation::LeakyRelu:
      return x >= 0.0 ? x : f.alpha * x;
    case RnnActivation::ThresholdedRelu:
      return x > f.alpha ? x : 0.0;
    case RnnActivation::ScaledTanh:
      return f.alpha * std::tanh(f.beta * x);
    case RnnActivation::HardSigmoid:
      return std::clamp(f.alpha * x + f.beta, 0.0, 1.0);
    case RnnActivation::Elu:
      return x >= 0.0 ? x : f.alpha * (std::exp(x) - 1.0);
    case RnnActivation::Softsign:
      return x / (1.0 + std::fabs(x));
    case RnnActivation::Softplus:  // log(1 + e^x), without overflowing e^x for large x
      return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

namespace {

template <int kGates>
Status infer(InferContext& ctx) {
  BATON_CHECK_OR_RETURN(ctx.rank(0) == 3 && ctx.rank(1) == 3 && ctx.rank(2) == 3, InvalidArgument,
                        "{}: X, W and R must be 3-D, got {}, {} and {}", ctx.what(),
                        shape_to_string(ctx.sizes(0)), shape_to_string(ctx.sizes(1)),
                        shape_to_string(ctx.sizes(2)));
  BATON_CHECK_OR_RETURN(ctx.attr_none("clip") || ctx.attr_float("clip") > 0.0, InvalidArgument,
                        "{}: 'clip' is a positive threshold, got {}", ctx.what(),
                        ctx.attr_float("clip"));
  const std::string& direction = ctx.attr_string("direction");
  BATON_CHECK_OR_RETURN(
      direction == "forward" || direction == "reverse" || direction == "bidirectional",
      InvalidArgument, "{}: 'direction' is forward, reverse or bidirectional, got '{}'", ctx.what(),
      direction);
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  BATON_TRY(rnn_functions(ctx.attr_none("activations") ? "" : ctx.attr_string("activations"),
                          ctx.attr_none("activation_alpha") ? std::vector<double>{}
                                                            : ctx.attr_floats("activation_alpha"),
                          ctx.attr_none("activation_beta") ? std::vector<double>{}
                                                           : ctx.attr_floats("activation_beta"),
                          kGates == 1   ? 1
                          : kGates == 3 ? 2
                                        : 3,
                          dirs, ctx.what())
                .status());
  const int64_t layout = ctx.def().attr_index("layout") >= 0 ? ctx.attr_int("layout") : 0;
  BATON_CHECK_OR_RETURN(layout == 0 || layout == 1, InvalidArgument,
                        "{}: 'layout' is 0 or 1, got {}", ctx.what(), layout);
  const auto x = ctx.sizes(0), w = ctx.sizes(1), r = ctx.sizes(2);
  const int64_t seq = layout == 0 ? x[0] : x[1], batch = layout == 0 ? x[1] : x[0];
  int64_t hidden = w[1] / kGates;
  if (!ctx.attr_none("hidden_size")) hidden = ctx.attr_int("hidden_size");
  BATON_CHECK_OR_RETURN(hidden > 0 && w[0] == dirs && w[1] == kGates * hidden && w[2] == x[2],
                        InvalidArgument,
                        "{}: W is {}; with {} direction(s), hidden_size {} and X {} it must be "
                        "[{}, {}, {}]",
                        ctx.what(), shape_to_string(w), dirs, hidden, shape_to_string(x), dirs,
                        kGates * hidden, x[2]);
  BATON_CHECK_OR_RETURN(r[0] == dirs && r[1] == kGates * hidden && r[2] == hidden, InvalidArgument,
                        "{}: R is {}; it must be [{}, {}, {}]", ctx.what(), shape_to_string(r),
                        dirs, kGates * hidden, hidden);
  auto expect = [&](size_t i, std::vector<int64_t> want, const char* name) -> Status {
    if (!ctx.has_input(i)) return Status();
    const auto s = ctx.sizes(i);
    BATON_CHECK_OR_RETURN(std::vector<int64_t>(s.begin(), s.end()) == want, InvalidArgument,
                          "{}: {} is {}; it must be {}", ctx.what(), name, shape_to_string(s),
                          shape_to_string(want));
    return Status();
  };
  const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                                                 : std::vector<int64_t>{batch, dirs, hidden};
  BATON_TRY(expect(3, {dirs, 2 * kGates * hidden}, "B"));
  BATON_TRY(expect(4, {batch}, "sequence_lens"));
  BATON_TRY(expect(5, state, "initial_h"));
  if (kGates == 4) {
    BATON_TRY(expect(6, state, "initial_c"));
    BATON_TRY(expect(7, {dirs, 3 * hidden}, "P"));
  }
  const DType t = ctx.input(0).dtype;
  if (ctx.num_outputs() > 0) {
    ctx.output(0).dtype = t;
    ctx.output(0).sizes = layout == 0 ? std::vector<int64_t>{seq, dirs, batch, hidden}
                                      : std::vector<int64_t>{batch, seq, dirs, hidden};
  }
  for (size_t o = 1; o < ctx.num_outputs(); ++o) {
    ctx.output(o).dtype = t;
    ctx.output(o).sizes = state;
  }
  return Status();
}

void add(OpRegistry& registry, std::string_view name, int gates, std::vector<InputDef> extra,
         std::vector<OutputDef> outputs, std::vector<AttrDef> own) {
  for (const int opset : {7, 14}) {
    OpDef def;
    def.name = name;
    def.since_version = opset;
    def.inputs = {{"X", "T"},
                  {"W", "T"},
                  {"R", "T"},
                  {"B", "T", Arity::Optional},
                  {"sequence_lens", "T1", Arity::Optional},
                  {"initial_h", "T", Arity::Optional}};
    def.inputs.insert(def.inputs.end(), extra.begin(), extra.end());
    def.outputs = outputs;
    def.attrs = {attr_optional("activations", AttrKind::String),
                 attr_optional("activation_alpha", AttrKind::Floats),
                 attr_optional("activation_beta", AttrKind::Floats),
                 attr_optional("clip", AttrKind::Float),
                 attr_string("direction", "forward"),
                 attr_optional("hidden_size", AttrKind::Int)};
    if (opset >= 14) def.attrs.push_back(attr_int("layout", 0));
    def.attrs.insert(def.attrs.end(), own.begin(), own.end());
    def.types = {{"T", DTypeSet{DType::Float32, DType::Float64}}, {"T1", {DType::Int32}}};
    def.infer = gates == 1 ? &infer<1> : gates == 3 ? &infer<3> : &infer<4>;
    registry.add(std::move(def));
  }
}

}  // namespace

void register_rnn(OpRegistry& registry) {
  const std::vector<OutputDef> two = {{"Y", "T", Arity::Optional}, {"Y_h", "T", Arity::Optional}};
  add(registry, "RNN", 1, {}, two, {});
  add(registry, "GRU", 3, {}, two, {attr_int("linear_before_reset", 0)});
  std::vector<OutputDef> three = two;
  three.push_back({"Y_c", "T", Arity::Optional});
  add(registry, "LSTM", 4, {{"initial_c", "T", Arity::Optional}, {"P", "T", Arity::Optional}},
      three, {attr_int("input_forget", 0)});
}

}  // namespace baton::ops
