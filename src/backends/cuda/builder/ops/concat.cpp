// Concat on the GPU. A Concat of one input (TorchScript's GPT-2 writes `torch.cat` of the key
// and of the value alone in every layer) is its input: a view, no step. Otherwise one kernel walks
// the output in the order it is stored and reads each element from the input whose slice of the
// axis it falls in (baton_concat_index, device/layout.cuh), through that input's strides:
// channels-last inputs and views (Transpose, Slice, Split) are read where they are, with no copy
// before the Concat. When every non-constant input is channels-last, the output is stored
// channels-last too, so a convolution reading it needs no conversion either.
//
// Having convolutions write their channels straight into the output (cuDNN with a pitched
// output) was measured slower: cuDNN 9.19 writes a pitched output through a packed one plus two
// slice-copy kernels per convolution, which cost more than this one kernel.
//
// A kernel takes at most kMaxKernelOperands pointers, so a Concat of more inputs than that
// (DenseNet's dense blocks concatenate up to 33 feature maps) is split into runs of consecutive
// inputs, one kernel each, every kernel writing only its run's slice of the axis: still each
// output element written once, and no copy per input.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// The fewest elements (at a dynamic engine's maxima) of a Concat run moved 16 bytes a thread.
constexpr int64_t kVectorConcatElements = int64_t{1} << 20;

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  // Any stored dtype: a dynamic export concatenates int64 indices (GPT-2's attention mask) as
  // well as floats.
  if (!engine_tensors(graph, node)) return false;
  const DType t = graph.values[node.outputs[0]].dtype;
  for (int v : node.inputs) {
    if (graph.values[v].dtype != t) return false;
  }
  return true;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  const std::vector<int64_t>& s = ctx.value(out).sizes;
  const size_t rank = s.size();
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  if (n.inputs.size() == 1 && !ctx.is_constant(n.inputs[0])) {
    ctx.view(out, n.inputs[0], ctx.strides_of(n.inputs[0]), 0);
    return Status();
  }

  // Floats are stored in the engine's activation dtype (to_f converts them); other dtypes are
  // copied as they are, so that integers never round through float.
  const DType dtype = ctx.value(out).dtype;
  const bool floating =
      dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
  std::vector<int> operands;
  bool channels_last = rank == 4, any_activation = false;
  for (int v : n.inputs) {
    const bool constant = ctx.is_constant(v);
    operands.push_back(constant ? operand_of(ctx, v) : v);
    if (!constant) {
      any_activation = true;
      channels_last = channels_last && ctx.channels_last(v);
    }
  }
  if (channels_last && any_activation) ctx.set_channels_last(out);  // not for a binding

  // The output's dimensions in storage order (N, H, W, C when channels-last), and each input's
  // sizes and strides in that order.
  std::vector<size_t> order(rank);
  std::iota(order.begin(), order.end(), size_t{0});
  if (ctx.channels_last(out)) order = {0, 2, 3, 1};
  auto permuted = [&](const std::vector<int64_t>& logical) {
    std::vector<int64_t> p;
    for (size_t d : order) p.push_back(logical[d]);
    return p;
  };
  const std::vector<int64_t> stored = permuted(s);
  const auto at = static_cast<size_t>(std::find(order.begin(), order.end(), axis) - order.begin());
  const int64_t inner = ops::product(stored, at + 1, rank);
  const int64_t total = stored[at];
  const int64_t outer = ops::product(stored, 0, at);
  // Runs of at most kMaxKernelOperands - 1 inputs (the output takes one pointer), one kernel
  // each, covering [first, first + run_total) of the axis.
  const size_t per_kernel = kMaxKernelOperands - 1;
  const bool split = n.inputs.size() > per_kernel;
  int64_t first = 0;
  for (size_t begin = 0; begin < n.inputs.size(); begin += per_kernel) {
    const size_t end = std::min(n.inputs.size(), begin + per_kernel);
    int64_t run_total = 0;
    for (size_t k = begin; k < end; ++k) run_total += permuted(ctx.value(n.inputs[k]).sizes)[at];

    // Sizes, strides and where each input starts along the axis are arguments: 7 (5, and the
    // run's place in the output when split), and per input 3, and 3 per dimension of an input
    // read through strides. Past kMaxKernelArgs (15 strided inputs
    // of rank 8 would take 410) they stay in the code.
    size_t needed = 7;
    for (size_t k = begin; k < end; ++k) {
      const int src = operands[k];
      needed += 3;
      if (!contiguous(permuted(ctx.value(n.inputs[k]).sizes), permuted(ctx.strides_of(src))))
        needed += 3 * rank;
    }
    // Whether vec elements that follow each other in the output (16 bytes of the widest type)
    // may move as one load and one store: they must share an input and lie next to each other in
    // it. Along the innermost stored dimension (a channels-last Concat of channels) that holds
    // when every input's share of the axis is a multiple of vec; otherwise when the axis's inner
    // block is. Decided at a dynamic engine's maxima, so that every size compiles the same code;
    // the kernel checks the sizes, strides and pointers of the call it runs and takes the
    // one-element loop when they do not allow it.
    // Only for a run of at least kVectorConcatElements: measured on an H200 (fp16, batch 1, A/B
    // against the one-element kernel in one call), the UNet's decoder Concats of 1M to 8M
    // elements made the model 1.10x faster (0.441 -> 0.400 ms), while DenseNet-121's Concats
    // (the dense blocks' last layers, 6K to 800K elements, up to 15 inputs a kernel) made it
    // 1.045x slower (0.781 -> 0.816 ms); why the small ones lose is not profiled yet.
    size_t widest = dtype_size(ctx.dtype_of(out));
    for (size_t k = begin; k < end; ++k)
      widest = std::max(widest, dtype_size(ctx.dtype_of(operands[k])));
    const auto vec = static_cast<int64_t>(16 / widest);
    const std::vector<int64_t> upper = permuted(ctx.upper_sizes_of(out));
    // An input's sizes at the maxima (a constant's are its own).
    auto upper_of = [&](int v) {
      return permuted(ctx.is_constant(v) ? ctx.value(v).sizes : ctx.upper_sizes_of(v));
    };
    int64_t upper_run = 0;
    for (size_t k = begin; k < end; ++k) upper_run += upper_of(n.inputs[k])[at];
    const int64_t upper_count =
        ops::product(upper, 0, at) * upper_run * ops::product(upper, at + 1, rank);
    bool vectorize = floating && vec > 1 && upper_count >= kVectorConcatElements;
    if (at + 1 == rank) {
      for (size_t k = begin; k < end; ++k) {
        vectorize = vectorize && upper_of(n.inputs[k])[at] % vec == 0;
      }
      // (The run's place at the maxima: `first` is at this probe's sizes, which may differ.)
      int64_t upper_first = 0;
      for (size_t k = 0; k < begin; ++k) upper_first += upper_of(n.inputs[k])[at];
      if (split) vectorize = vectorize && upper[at] % vec == 0 && upper_first % vec == 0;
    } else {
      vectorize = vectorize && ops::product(upper, at + 1, rank) % vec == 0;
    }
    // The vector path's test takes one more value per input when the axis is innermost.
    if (vectorize && at + 1 == rank) needed += end - begin;
    KernelArgs args = needed <= kMaxKernelArgs ? ctx.kernel_args() : KernelArgs(/*in_code=*/true);
    const int64_t count = outer * run_total * inner;
    std::string params, arrays, body, vector_body;
    // (`inner` is the kernel's local, declared with the sizes below.)
    std::string vector_test = at + 1 == rank ? "true" : fmt::format("inner % {} == 0", vec);
    int64_t start = 0;  // along the axis, from the run's first element
    for (size_t k = begin; k < end; ++k) {
      const int src = operands[k];
      const std::vector<int64_t> sizes = permuted(ctx.value(n.inputs[k]).sizes);
      const std::vector<int64_t> strides = permuted(ctx.strides_of(src));
      const int64_t size = sizes[at];
      params += fmt::format("const {}* __restrict__ x{}, ", device_type_name(ctx.dtype_of(src)), k);
      // The element's index in the input as if it were stored densely in the output's order.
      std::string element = fmt::format("(c.outer * {} + (c.axis - {})) * inner + c.inner",
                                        args.value(size), args.value(start));
      if (vectorize) {
        vector_test += fmt::format(" && baton_vec_aligned<{}>(x{})", vec, k);
        if (at + 1 == rank) vector_test += fmt::format(" && {} % {} == 0", args.value(size), vec);
      }
      if (!contiguous(sizes, strides)) {
        arrays += args.array(fmt::format("sizes{}", k), sizes) +
                  args.array(fmt::format("strides{}", k), strides);
        // Read through strides, the vec elements are next to each other when the innermost
        // stored dimension has stride 1 and holds whole vectors, and aligned when every other
        // stride is a multiple of vec.
        if (vectorize) {
          vector_test +=
              fmt::format(" && strides{0}[{1}] == 1 && sizes{0}[{1}] % {2} == 0", k, rank - 1, vec);
          for (size_t d = 0; d + 1 < rank; ++d) {
            vector_test += fmt::format(" && strides{}[{}] % {} == 0", k, d, vec);
          }
        }
        if (args.magic_division(count)) {
          arrays += args.array(fmt::format("magic{}", k), division_magics(sizes, true));
          element = fmt::format("baton_offset_fast<{}>({}, sizes{}, magic{}, strides{})", rank,
                                element, k, k, k);
        } else {
          element = fmt::format("baton_offset<{}>({}, sizes{}, strides{})", rank, element, k, k);
        }
      }
      // (The operand's pointer is at the input's first element.)
      const std::string read = floating ? fmt::format("st(&y[yi], to_f(x{}[{}]))", k, element)
                                        : fmt::format("y[yi] = x{}[{}]", k, element);
      // (The same value for both loops: each args.value() call is an argument of its own.)
      const std::string end_of_input = args.value(start + size);
      body +=
          fmt::format("    {}if (c.axis < {}) {};\n", k > begin ? "else " : "", end_of_input, read);
      vector_body += fmt::format("    {}if (c.axis < {}) baton_vec_load<{}>(x{} + ({}), v);\n",
                                 k > begin ? "else " : "", end_of_input, vec, k, element);
      start += size;
    }
    std::vector<int> run_operands(operands.begin() + static_cast<ptrdiff_t>(begin),
                                  operands.begin() + static_cast<ptrdiff_t>(end));
    run_operands.push_back(out);
    const std::string name = ctx.kernel_name("concat");
    // [outer, total, inner] coordinates of the run's element i (total: the run's part of the
    // axis): two quotients. Its place in the output: i itself when one kernel does the whole
    // Concat.
    const std::string coordinates = fmt::format(
        "    const long long r = {}, o = {};\n"
        "    const ConcatIndex c{{o, r - o * total, i - r * inner}};\n{}",
        args.quotient("i", inner, count), args.quotient("r", run_total, count),
        split ? "    const long long yi = (c.outer * full + first + c.axis) * inner + c.inner;\n"
              : "    const long long yi = i;\n");
    std::string sizes = fmt::format("  const long long total = {}, inner = {};\n",
                                    args.value(run_total), args.value(inner));
    if (split) {
      sizes += fmt::format("  const long long full = {}, first = {};\n", args.value(total),
                           args.value(first));
      if (vectorize && at + 1 == rank)
        vector_test += fmt::format(" && full % {0} == 0 && first % {0} == 0", vec);
    }
    const std::string elements = args.value(count);
    std::string vector_loop;
    if (vectorize) {
      // One 16-byte access per vec elements: moving 2 bytes a thread, one element at a time,
      // a UNet decoder's channels-last Concats ran far below the memory's speed.
      vector_loop = fmt::format(
          "  if ({0} && baton_vec_aligned<{1}>(y)) {{\n"
          "    baton_for_each({2} / {1}, [&](long long j) {{\n"
          "    const long long i = j * {1};\n{3}"
          "    float v[{1}];\n{4}"
          "    baton_vec_store<{1}>(y + yi, v);\n"
          "    }});\n"
          "    return;\n"
          "  }}\n",
          vector_test, vec, elements, coordinates, vector_body);
    }
    std::string code = fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({}) {}({}{}* __restrict__ y{}) {{\n{}{}{}"
        "  baton_for_each({}, [&](long long i) {{\n{}{}  }});\n}}\n",
        kBlock, name, params, device_type_name(ctx.dtype_of(out)), args.parameter(), sizes, arrays,
        vector_loop, elements, coordinates, body);
    // Enough threads for the vector loop; the one-element loop strides over the rest.
    const LaunchShape launch = vectorize ? vector_launch(count, vec) : grid_stride_launch(count);
    ctx.add_kernel(name, std::move(code), launch, std::move(run_operands), args);
    first += run_total;
  }
  return Status();
}

}  // namespace

bool concat_reads_in_place(const Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  if (ctx.target().options.concat == ConcatReads::Kernel) return false;
  const DType t = ctx.value(out).dtype;
  if (t != DType::Float32 && t != DType::Float16 && t != DType::BFloat16) return false;
  if (n.inputs.size() < 2 || ctx.is_partition_output(out) || ctx.consumers(out).empty()) {
    return false;
  }
  for (int v : n.inputs) {
    if (ctx.is_constant(v)) return false;
  }
  // The decision reads sizes at a dynamic engine's maxima, so that every probe makes it alike.
  const std::vector<int64_t>& sizes = ctx.upper_sizes_of(out);
  for (int c : ctx.consumers(out)) {
    const compiler::IrNode& reader = ctx.node(c);
    if (!is_fusible(ctx.graph(), reader) || ctx.upper_sizes_of(reader.outputs[0]) != sizes) {
      return false;
    }
    for (int v : reader.inputs) {
      if (v >= 0 && v != out && !ctx.is_constant(v)) return false;
    }
  }
  return true;
}

Status lower_deferred_concat(Lowering& ctx, int v) {
  const int index = ctx.deferred_concat(v);
  BATON_CHECK_OR_RETURN(index >= 0, Internal, "value {} is not a deferred Concat's output", v);
  ctx.end_deferral(v);
  ctx.read_row_major_inputs(index, kConcatLowering.layout_aware, kConcatLowering.strided);
  const Status lowered = lower(ctx, index);
  ctx.end_reads();
  return lowered;
}

// Layout-aware and strided: reads channels-last inputs and views (Transpose, Slice, Split) where
// they are, through Lowering::strides_of, with no copy before the Concat.
const OpLowering kConcatLowering{.op = "Concat",
                                 .supports = &supports,
                                 .lower = &lower,
                                 .layout_aware = true,
                                 .strided = true,
                                 .types = kEngineTypes};

}  // namespace baton::cuda
