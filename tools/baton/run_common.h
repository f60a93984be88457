// What `baton run` and `baton compare` share: inputs (from .npy files or random), reading output
// values, numbers for people (durations, byte sizes), quantiles, and the GPUs a program needs.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "baton/core/tensor.h"
#include "baton/extension/inspect.h"
#include "baton/runtime/program.h"

namespace baton::tool {

// Resolves --input arguments (NAME=FILE.npy binds by name, FILE.npy takes the next input in
// order) against the method's inputs; with none given, every input is random, seeded by `seed`
// (uniform in [-1, 1) for floats, integers in 0..9, booleans 0 or 1). A dynamic input's file
// may have any shape the program takes (the runtime checks the ranges when it is set); a random
// one has the shape `shapes` gives it (--shape NAME=D0xD1x...), else its largest.
Result<std::vector<Tensor>> load_inputs(const std::vector<std::string>& args, unsigned seed,
                                        runtime::Method& method,
                                        const std::vector<std::string>& shapes = {});

// The index of the method's input named `name`, or num_inputs() when there is none; and the
// inputs' names as a list for messages ("'input_ids', 'attention_mask'").
size_t input_index(const runtime::Method& method, std::string_view name);
std::string input_names(const runtime::Method& method);

// "input=8x16" -> {"input", {8, 16}}; `flag` names the option in messages ("--shape").
Result<std::pair<std::string, std::vector<int64_t>>> parse_shape_flag(const std::string& text,
                                                                      std::string_view flag);

// "[batch, 3, 224, 224]" for a dynamic input (its dimensions' expressions), else its sizes.
std::string input_shape_text(const runtime::Method& method, size_t index);

// "15496,11,995" -> {15496, 11, 995}: integers >= 0, comma-separated ("" is none). `flag`
// ("--prompt-ids") and `what` ("a token id") name the option and an item in messages.
Result<std::vector<int64_t>> parse_index_list(std::string_view text, std::string_view flag,
                                              std::string_view what);

// --load-option KEY=VALUE arguments as MethodOptions::backend_options (InvalidArgument for one
// without '='; the keys and values are checked when the method loads).
Result<std::vector<runtime::BackendOption>> parse_load_options(
    const std::vector<std::string>& args);

// Element i of a host tensor of any dtype, as a double.
double element_as_double(const TensorView& t, int64_t i);

// A host tensor's minimum, maximum and mean over the elements that are not NaN (infinite and NaN
// when there are none), how many are NaN, and its first (up to 4) elements.
struct TensorStats {
  double min = 0, max = 0, mean = 0;
  int64_t nan = 0;
  std::vector<double> first;
};
TensorStats tensor_stats(const TensorView& t);

// "min -0.23  max 0.2  mean 0.0089  first [0.11, ...]" (and the NaN count, if any).
std::string summarize(const TensorView& t);

// Value at quantile q (nearest rank) of sorted samples; 0 when there are none.
double quantile(const std::vector<double>& sorted, double q);

// A duration for people: "13.4 us" under 0.1 ms, else "0.482 ms" (three decimals).
std::string duration_text(double ms);

// The host copy of method output `index` (from wherever it lives).
Result<Tensor> output_to_host(const runtime::Method& method, size_t index);

// The GPUs a program's method "forward" runs on: its device arenas and its delegates' devices
// (read from the program's description, which needs no GPU), where `device_map` moves them.
std::vector<Device> gpus_needed(const runtime::Program& program,
                                std::span<const runtime::DeviceMapping> device_map = {});

// The model's name of a program value ("logits@cpu" -> "logits";
// include/baton/extension/inspect.h).
using extension::model_name;

// "output_0_logits.npy": output `index` named after its tensor's model name, with every character
// that is not a letter, digit, '-', '_' or '.' written as '_' (names come from models unchecked).
std::string output_file_name(size_t index, std::string_view tensor_name);

}  // namespace baton::tool
