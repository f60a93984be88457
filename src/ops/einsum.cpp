// ONNX Einsum (opset 12): a sum of products over the labels of an Einstein-summation equation
// ("ij,jk->ik", "bhqd,bhkd->bhqk", "ij->ji", "ii->i", "...ij->...ji"). Canonical form: the
// explicit equation (ops/einsum.h).
#include "ops/einsum.h"

#include <algorithm>
#include <map>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

constexpr int kEllipsis = -1;

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A term's letters (as their char codes) and kEllipsis for "...".
Result<std::vector<int>> parse_term(std::string_view term, std::string_view equation,
                                    std::string_view what) {
  std::vector<int> tokens;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (is_letter(term[i])) {
      tokens.push_back(term[i]);
      continue;
    }
    BATON_CHECK_OR_RETURN(term.substr(i, 3) == "...", InvalidArgument,
                          "{}: equation '{}' has '{}' in term '{}'; terms hold letters and at "
                          "most one '...'",
                          what, equation, term[i], term);
    BATON_CHECK_OR_RETURN(!ellipsis, InvalidArgument,
                          "{}: equation '{}' has two '...' in term '{}'", what, equation, term);
    ellipsis = true;
    tokens.push_back(kEllipsis);
    i += 2;
  }
  return tokens;
}

std::string term_text(const std::vector<int>& tokens) {
  std::string s;
  for (int t : tokens) {
    if (t == kEllipsis) {
      s += "...";
    } else {
      s += static_cast<char>(t);
    }
  }
  return s;
}

}  // namespace

Result<EinsumPlan> plan_einsum(std::string_view raw,
                               std::span<const std::span<const int64_t>> shapes,
                               std::string_view what) {
  std::string equation;
  for (char c : raw) {
    if (c != ' ') equation += c;
  }
  const size_t arrow = equation.find("->");
  const std::string_view lhs = std::string_view(equation).substr(0, arrow);
  BATON_CHECK_OR_RETURN(
      arrow == std::string::npos || equation.find("->", arrow + 2) == std::string::npos,
      InvalidArgument, "{}: equation '{}' has more than one '->'", what, raw);
  std::vector<std::vector<int>> terms;
  for (size_t begin = 0;;) {
    const size_t comma = lhs.find(',', begin);
    BATON_ASSIGN_OR_RETURN(std::vector<int> t,
                           parse_term(lhs.substr(begin, comma - begin), raw, what));
    terms.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  BATON_CHECK_OR_RETURN(terms.size() == shapes.size(), InvalidArgument,
                        "{}: equation '{}' has {} input terms for {} inputs", what, raw,
                        terms.size(), shapes.size());

  // How many dimensions each input's ellipsis stands for; the widest sets the ellipsis rank.
  std::vector<size_t> ellipsis_rank(terms.size(), 0);
  bool any_ellipsis = false;
  size_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t letters =
        std::count_if(terms[i].begin(), terms[i].end(), [](int t) { return t != kEllipsis; });
    const bool has = letters != terms[i].size();
    const size_t rank = shapes[i].size();
    BATON_CHECK_OR_RETURN(has ? rank >= letters : rank == letters, InvalidArgument,
                          "{}: term '{}' of equation '{}' names {} dimensions, but input {} is {}",
                          what, term_text(terms[i]), raw, letters, i, shape_to_string(shapes[i]));
    if (has) {
      any_ellipsis = true;
      ellipsis_rank[i] = rank - letters;
      ellipsis_dims = std::max(ellipsis_dims, ellipsis_rank[i]);
    }
  }

  EinsumPlan plan;
  plan.label_sizes.assign(ellipsis_dims, 1);
  std::map<int, int> letter_label;  // char -> label
  std::map<int, int> uses;          // char -> occurrences over all inputs
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int>& labels = plan.input_labels.emplace_back();
    size_t axis = 0;
    for (int t : terms[i]) {
      if (t == kEllipsis) {
        for (size_t e = 0; e < ellipsis_rank[i]; ++e, ++axis) {
          const int label = static_cast<int>(ellipsis_dims - ellipsis_rank[i] + e);
          const int64_t s = shapes[i][axis];
          int64_t& size = plan.label_sizes[label];
          BATON_CHECK_OR_RETURN(s == 1 || size == 1 || s == size, InvalidArgument,
                                "{}: the '...' dimensions of the inputs do not broadcast (input "
                                "{} is {})",
                                what, i, shape_to_string(shapes[i]));
          if (s != 1) size = s;
          labels.push_back(label);
        }
        continue;
      }
      auto [it, added] = letter_label.emplace(t, static_cast<int>(plan.label_sizes.size()));
      if (added) plan.label_sizes.push_back(shapes[i][axis]);
      ++uses[t];
      BATON_CHECK_OR_RETURN(plan.label_sizes[it->second] == shapes[i][axis], InvalidArgument,
                            "{}: label '{}' of equation '{}' has size {} in input {} {} but {} "
                            "elsewhere",
                            what, static_cast<char>(t), raw, shapes[i][axis], i,
                            shape_to_string(shapes[i]), plan.label_sizes[it->second]);
      labels.push_back(it->second);
      ++axis;
    }
  }

  std::vector<int> output;
  if (arrow != std::string::npos) {
    BATON_ASSIGN_OR_RETURN(output,
                           parse_term(std::string_view(equation).substr(arrow + 2), raw, what));
  } else {
    if (any_ellipsis) output.push_back(kEllipsis);
    for (const auto& [letter, n] : uses) {  // std::map: ASCII order
      if (n == 1) output.push_back(letter);
    }
  }
  std::vector<bool> in_output(plan.label_sizes.size(), false);
  for (int t : output) {
    if (t == kEllipsis) {
      for (size_t e = 0; e < ellipsis_dims; ++e) plan.output_labels.push_back(static_cast<int>(e));
      continue;
    }
    auto it = letter_label.find(t);
    BATON_CHECK_OR_RETURN(it != letter_label.end(), InvalidArgument,
                          "{}: output label '{}' of equation '{}' is in no input term", what,
                          static_cast<char>(t), raw);
    BATON_CHECK_OR_RETURN(!in_output[it->second], InvalidArgument,
                          "{}: output label '{}' of equation '{}' appears twice", what,
                          static_cast<char>(t), raw);
    in_output[it->second] = true;
    plan.output_labels.push_back(it->second);
  }

  for (size_t i = 0; i < terms.size(); ++i) {
    if (i) plan.canonical += ',';
    plan.canonical += term_text(terms[i]);
  }
  plan.canonical += "->" + term_text(output);
  return plan;
}

EinsumContraction plan_contraction(const EinsumPlan& plan,
                                   std::span<const std::span<const int64_t>> shapes) {
  EinsumContraction c;
  const size_t labels = plan.label_sizes.size();
  auto volume = [&](const std::vector<int>& ls) {
    double v = 1;
    for (int l : ls) v *= static_cast<double>(plan.label_sizes[l]);
    return v;
  };
  auto contains = [](const std::vector<int>& ls, int l) {
    return std::find(ls.begin(), ls.end(), l) != ls.end();
  };
  std::vector<std::vector<int>> operands;
  for (size_t i = 0; i < plan.input_labels.size(); ++i) {
    EinsumContraction::Reduce r;
    for (size_t a = 0; a < plan.input_labels[i].size(); ++a) {
      const int l = plan.input_labels[i][a];
      if (shapes[i][a] == 1 && plan.label_sizes[l] != 1) continue;  // broadcast: not its label
      if (!contains(r.labels, l)) r.labels.push_back(l);
    }
    c.reduces.push_back(std::move(r));
  }
  // A label is needed beyond an operand when the output or another operand has it.
  std::vector<int> in_output(labels, 0);
  for (int l : plan.output_labels) in_output[l] = 1;
  for (size_t i = 0; i < c.reduces.size(); ++i) {
    EinsumContraction::Reduce& r = c.reduces[i];
    for (int l : r.labels) {
      bool elsewhere = in_output[l] != 0;
      for (size_t j = 0; j < c.reduces.size() && !elsewhere; ++j) {
        elsewhere = j != i && contains(c.reduces[j].labels, l);
      }
      if (elsewhere) r.kept.push_back(l);
    }
    c.work += volume(r.labels);
    operands.push_back(r.kept);
  }
  while (operands.size() > 1) {
    EinsumContraction::Pair best;
    double best_size = -1;
    for (size_t a = 0; a < operands.size(); ++a) {
      for (size_t b = a + 1; b < operands.size(); ++b) {
        EinsumContraction::Pair p;
        p.a = a;
        p.b = b;
        auto needed = [&](int l) {
          if (in_output[l]) return true;
          for (size_t o = 0; o < operands.size(); ++o) {
            if (o != a && o != b && contains(operands[o], l)) return true;
          }
          return false;
        };
        for (int l : operands[a]) {
          const bool both = contains(operands[b], l);
          if (!needed(l)) {
            p.summed.push_back(l);  // every label of a reduced operand is needed by someone
          } else if (both) {
            p.batch.push_back(l);
          } else {
            p.left.push_back(l);
          }
        }
        for (int l : operands[b]) {
          if (!contains(operands[a], l)) p.right.push_back(l);
        }
        const double size = volume(p.batch) * volume(p.left) * volume(p.right);
        if (best_size < 0 || size < best_size) {
          best_size = size;
          best = std::move(p);
        }
      }
    }
    c.work += volume(operands[best.a]) + volume(operands[best.b]) +
              volume(best.batch) * volume(best.left) * volume(best.right) *
                  std::max(1.0, volume(best.summed));
    std::vector<int> result = best.batch;
    result.insert(result.end(), best.left.begin(), best.left.end());
    result.insert(result.end(), best.right.begin(), best.right.end());
    operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(best.b));
    operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(best.a));
    operands.push_back(std::move(result));
    c.pairs.push_back(std::move(best));
  }
  c.result_labels = operands.front();
  double out = 1;
  for (int l : plan.output_labels) out *= static_cast<double>(plan.label_sizes[l]);
  c.work += out;
  return c;
}

namespace {

Status infer(InferContext& ctx) {
  std::vector<std::span<const int64_t>> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.sizes(i));
  BATON_ASSIGN_OR_RETURN(EinsumPlan plan,
                         plan_einsum(ctx.attr_string("equation"), shapes, ctx.what()));
  std::vector<int64_t> y;
  for (int label : plan.output_labels) y.push_back(plan.label_sizes[label]);
  ctx.output(0).sizes = std::move(y);
  ctx.set_attr("equation", AttrValue::of_string(std::move(plan.canonical)));
  return Status();
}

}  // namespace

void register_einsum(OpRegistry& registry) {
  OpDef def;
  def.name = "Einsum";
  def.since_version = 12;
  def.inputs = {{"Inputs", "T", Arity::Variadic}};
  def.outputs = {{"Output", "T"}};
  def.attrs = {attr_required("equation", AttrKind::String)};
  def.types = {{"T", DTypeSet::from_bits(kNumericTypes.bits() & ~DTypeSet::bit(DType::BFloat16))}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
