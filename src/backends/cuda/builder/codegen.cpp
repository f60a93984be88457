#include "backends/cuda/builder/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace baton::cuda {
namespace {

constexpr int64_t kMaxGrid = int64_t{1} << 18;

// A one-input typed kernel whose input is a row-pitched view (rows of at least kRowCopyMinCols
// elements, contiguous within a row, one pitch from row to row; GPT-2's logits padded to 50264
// columns and gathered into the caller's 50257-wide buffer) runs a row kernel instead of the
// element loop: each block takes kRowCopyCols columns of one row, each thread kRowCopyUnroll
// elements kBlock apart, all loads before the stores. The row and the column come from the
// block index (a 32-bit division by a constant per thread, not the 64-bit divisions per element
// of baton_offset), and the accesses of a warp are coalesced on both sides at any alignment.
constexpr int64_t kRowCopyMinCols = 256;
constexpr int64_t kRowCopyUnroll = 4;
constexpr int64_t kRowCopyCols = kBlock * kRowCopyUnroll;

struct RowPitch {
  int64_t rows = 0, cols = 0, pitch = 0;
};

// `sizes` read at `strides` as rows x cols with an input row pitch, if they are that: dimensions
// of size 1 dropped, the innermost of stride 1, the outer ones collapsing into one run of rows.
std::optional<RowPitch> row_pitched(const std::vector<int64_t>& sizes,
                                    const std::vector<int64_t>& strides) {
  std::vector<int64_t> sz, st;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    sz.push_back(sizes[d]);
    st.push_back(strides[d]);
  }
  if (sz.size() < 2 || st.back() != 1 || sz.back() < kRowCopyMinCols) return std::nullopt;
  for (size_t d = 0; d + 2 < sz.size(); ++d) {
    if (st[d] != st[d + 1] * sz[d + 1]) return std::nullopt;
  }
  RowPitch r;
  r.cols = sz.back();
  r.pitch = st[st.size() - 2];
  r.rows = 1;
  for (size_t d = 0; d + 1 < sz.size(); ++d) r.rows *= sz[d];
  if (r.rows < 1) return std::nullopt;  // empty: the element loop launches one block
  // Rows apart and in order (broadcast or overlapping rows keep the element loop).
  if (r.pitch < r.cols) return std::nullopt;
  const int64_t chunks = (r.cols + kRowCopyCols - 1) / kRowCopyCols;
  if (r.rows * chunks >= (int64_t{1} << 31)) return std::nullopt;
  return r;
}

}  // namespace

bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expect = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

std::string float_literal(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return fmt::format("__int_as_float(0x{:08x})", bits);
}

std::string KernelArgs::value(int64_t v) {
  if (in_code_) return fmt::format("{}LL", v);
  values_.push_back(v);
  return fmt::format("a.v[{}]", values_.size() - 1);
}

std::string KernelArgs::array(std::string_view name, const std::vector<int64_t>& values) {
  std::string items;
  for (size_t i = 0; i < values.size(); ++i) items += (i ? ", " : "") + value(values[i]);
  return fmt::format("  {} long long {}[{}] = {{{}}};\n", in_code_ ? "constexpr" : "const", name,
                     values.size(), items);
}

bool KernelArgs::magic_division(int64_t count) const {
  return !in_code_ && count < (int64_t{1} << 31);
}

std::string KernelArgs::quotient(std::string_view x, int64_t d, int64_t count) {
  if (in_code_) return fmt::format("(({}) / {}LL)", x, d);
  if (!magic_division(count)) return fmt::format("(({}) / {})", x, value(d));
  return fmt::format("((long long)baton_div((unsigned)({}), {}))", x, value(division_magic(d)));
}

std::string KernelArgs::parameter() const {
  if (values_.empty()) return std::string();
  return fmt::format(", const BatonArgs<{}> a", values_.size());
}

std::vector<int64_t> division_magics(const std::vector<int64_t>& divisors, bool magic) {
  std::vector<int64_t> out(divisors.size(), 0);
  if (magic) {
    for (size_t i = 0; i < divisors.size(); ++i) out[i] = division_magic(divisors[i]);
  }
  return out;
}

ElementIndex::ElementIndex(KernelArgs& args, const std::vector<int64_t>& sizes)
    : args_(args), sizes_(sizes.empty() ? std::vector<int64_t>{1} : sizes) {}

std::string ElementIndex::offset(std::string_view i, std::string_view strides) {
  if (declarations_.empty()) {
    int64_t n = 1;
    for (int64_t x : sizes_) n *= x;
    declarations_ = args_.array("sizes", sizes_);
    // Divisions by constants become multiplications in the compiler; divisions by arguments
    // would be 64-bit division routines, so indices below 2^31 divide by multiplying with magics.
    fast_ = args_.magic_division(n);
    if (fast_) declarations_ += args_.array("magic", division_magics(sizes_, true));
  }
  if (fast_) {
    return fmt::format("baton_offset_fast<{}>({}, sizes, magic, {})", sizes_.size(), i, strides);
  }
  return fmt::format("baton_offset<{}>({}, sizes, {})", sizes_.size(), i, strides);
}

LaunchShape vector_launch(int64_t n, int64_t per_thread) {
  LaunchShape launch = grid_stride_launch(n);
  launch.per_block = kBlock * per_thread;
  launch.grid = static_cast<uint32_t>(
      std::clamp<int64_t>((n + launch.per_block - 1) / launch.per_block, 1, launch.cap));
  return launch;
}

LaunchShape grid_stride_launch(int64_t n) {
  LaunchShape launch;
  launch.block = kBlock;
  launch.grid = static_cast<uint32_t>(std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, kMaxGrid));
  launch.count = n;
  launch.per_block = kBlock;
  launch.cap = kMaxGrid;
  return launch;
}

std::string int_list(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) out += fmt::format("{}{}LL", i ? ", " : "", values[i]);
  return out + "}";
}

std::string_view device_type_name(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return "half_t";
    case DType::BFloat16:
      return "bf16_t";
    case DType::Int8:
      return "signed char";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int16:
      return "short";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Bool:
      return "bool_t";
    default:
      return "float";
  }
}

std::string kernel_prelude() {
  return "// Generated by the Baton engine builder.\n"
         "#include \"baton/common.cuh\"\n"
         "#include \"baton/layout.cuh\"\n"
         "#include \"baton/pool.cuh\"\n"
         "#include \"baton/reduce.cuh\"\n"
         "#include \"baton/softmax.cuh\"\n"
         "#include \"baton/typed.cuh\"\n"
         "#include \"baton/layer_norm.cuh\"\n"
         "#include \"baton/attention.cuh\"\n"
         "#include \"baton/gemv.cuh\"\n"
         "#include \"baton/along_axis.cuh\"\n"
         "#include \"baton/pad.cuh\"\n"
         "#include \"baton/group_norm.cuh\"\n";
}

namespace {

// How the vectorized loop of a fused kernel reads one input, W neighbouring output elements at a
// time (i0 a multiple of W).
enum class VecRead {
  Literal,   // a constant baked into the code
  Vector,    // contiguous: W elements at i0, one access
  VectorAt,  // rows contiguous: W elements at the offset of i0 (W divides the row and the strides)
  Splat,     // one value for the whole tensor (every stride 0)
  SplatAt,   // broadcast along the last dimension: one value at the offset of i0
  Pieces,    // a Concat read in place: W elements of one contiguous piece (the kernel checks that
             // W divides the rows inside the Concat's axis, or, with none, every piece's extent)
};

// The sizes of piece `p` of a pieced input: the output's, with the piece's extent along the axis.
std::vector<int64_t> piece_sizes(const FusedKernel& k, const FusedInput& in, const FusedPiece& p) {
  std::vector<int64_t> sizes = k.sizes;
  sizes[static_cast<size_t>(in.axis)] = p.size;
  return sizes;
}

// Elements per access of the vectorized loop, or 0 when the kernel keeps one element per thread:
// 16 bytes of the widest float type among its inputs and outputs, when every input is read by one
// of the VecRead ways. Whether W divides the element count, the last dimension and the strides
// of the VectorAt reads is not decided here but checked by the kernel when it runs (with the
// pointers' alignment): a decision made from the sizes would give a dynamic engine a different
// kernel at different sizes (an elementwise chain over [3, N] is vectorized where 3N divides by
// 4), which one engine cannot be, and with the sizes as arguments the check costs a few integer
// operations per launch.
int vector_width(const FusedKernel& k, std::vector<VecRead>* reads) {
  size_t widest = 0;
  auto float_type = [&](DType d) {
    if (d != DType::Float32 && d != DType::Float16 && d != DType::BFloat16) return false;
    widest = std::max(widest, dtype_size(d));
    return true;
  };
  for (const FusedInput& in : k.inputs) {
    for (const FusedPiece& p : in.pieces) {
      if (!float_type(p.dtype)) return 0;
    }
    if (!in.literal && in.pieces.empty() && !float_type(in.dtype)) return 0;
  }
  for (const FusedOutput& out : k.outputs) {
    if (!float_type(out.dtype)) return 0;
  }
  if (widest == 0) return 0;
  const int64_t w = static_cast<int64_t>(16 / widest);
  if (k.sizes.empty()) return 0;
  reads->clear();
  for (const FusedInput& in : k.inputs) {
    const std::vector<int64_t>& st = in.strides;
    const bool all_zero = std::all_of(st.begin(), st.end(), [](int64_t x) { return x == 0; });
    if (in.literal) {
      reads->push_back(VecRead::Literal);
    } else if (!in.pieces.empty()) {
      for (const FusedPiece& p : in.pieces) {
        if (!contiguous(piece_sizes(k, in, p), p.strides)) return 0;
      }
      reads->push_back(VecRead::Pieces);
    } else if (all_zero) {
      reads->push_back(VecRead::Splat);
    } else if (contiguous(k.sizes, st)) {
      reads->push_back(VecRead::Vector);
    } else if (st.back() == 1) {
      reads->push_back(VecRead::VectorAt);
    } else if (st.back() == 0) {
      reads->push_back(VecRead::SplatAt);
    } else {
      return 0;  // a gather: one element per thread
    }
  }
  return static_cast<int>(w);
}

}  // namespace

// The kernel reads and writes one element per thread, or, when vector_width allows it and every
// pointer is aligned for it at run time (a binding may sit anywhere), W neighbouring elements with
// one 16-byte access per input and output; the one-element loop stays as the fallback.
std::string generate_fused(const FusedKernel& k, LaunchShape* launch, KernelArgs* args) {
  int64_t n = 1;
  for (int64_t s : k.sizes) n *= s;
  std::string params;
  int arg = 0;
  std::vector<int> ptr_of(k.inputs.size(), -1);  // a pieced input's first piece's
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    const FusedInput& in = k.inputs[x];
    if (in.literal) continue;
    ptr_of[x] = arg;
    if (!in.pieces.empty()) {
      for (const FusedPiece& p : in.pieces) {
        params += fmt::format("{}const {}* __restrict__ p{}", arg ? ", " : "",
                              device_type_name(p.dtype), arg);
        ++arg;
      }
      continue;
    }
    params += fmt::format("{}const {}* __restrict__ p{}", arg ? ", " : "",
                          device_type_name(in.dtype), arg);
    ++arg;
  }
  const int first_output = arg;
  for (const FusedOutput& out : k.outputs) {
    params +=
        fmt::format("{}{}* __restrict__ p{}", arg ? ", " : "", device_type_name(out.dtype), arg);
    ++arg;
  }
  ElementIndex index(*args, k.sizes);
  std::string body;  // the strides arrays; the index's declarations go before them
  std::string loop;
  std::vector<std::string> names;
  // A pieced input (a Concat read in place): its sizes as the kernel reads them, each asked for
  // once: the elements inside one step of the axis (inner), the axis's extent, and each piece's
  // extent and end along it.
  struct Pieced {
    std::string inner, total;
    int64_t inner_value = 1;
    std::vector<std::string> size, end;
  };
  std::vector<Pieced> pieced(k.inputs.size());
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    const FusedInput& in = k.inputs[x];
    if (in.pieces.empty()) continue;
    const auto axis = static_cast<size_t>(in.axis);
    Pieced& pc = pieced[x];
    for (size_t d = axis + 1; d < k.sizes.size(); ++d) pc.inner_value *= k.sizes[d];
    pc.inner = args->value(pc.inner_value);
    pc.total = args->value(k.sizes[axis]);
    int64_t end = 0;
    for (const FusedPiece& p : in.pieces) {
      end += p.size;
      pc.size.push_back(args->value(p.size));
      pc.end.push_back(args->value(end));
    }
  }
  // Declarations of element `i`'s coordinates in pieced input x: q (i / inner), r (the index
  // outside the axis), c (along the axis) and e (inside it), suffixed with x.
  auto coordinates = [&](size_t x, std::string_view i, const std::string& indent) {
    const Pieced& pc = pieced[x];
    const std::string q = fmt::format("q{}", x), r = fmt::format("r{}", x);
    return fmt::format(
        "{0}const long long {1} = {3};\n{0}const long long {2} = {4};\n"
        "{0}const long long c{5} = {1} - {2} * {6};\n{0}const long long e{5} = {7} - {1} * {8};\n",
        indent, q, r, args->quotient(i, pc.inner_value, n),
        args->quotient(q, k.sizes[static_cast<size_t>(k.inputs[x].axis)], n), x, pc.total, i,
        pc.inner);
  };
  // Where piece j of pieced input x holds the element at those coordinates, when the piece is
  // stored densely in the kernel's order.
  auto piece_offset = [&](size_t x, size_t j) {
    const Pieced& pc = pieced[x];
    const std::string start = j == 0 ? std::string("0") : pc.end[j - 1];
    return fmt::format("(r{0} * {1} + (c{0} - {2})) * {3} + e{0}", x, pc.size[j], start, pc.inner);
  };
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    const FusedInput& in = k.inputs[x];
    const std::string v = fmt::format("v{}", x);
    if (!in.pieces.empty()) {
      // The piece the element falls in, read there: a chain of conditionals evaluates one read.
      loop += coordinates(x, "i", "    ");
      std::string read;
      for (size_t j = 0; j < in.pieces.size(); ++j) {
        const FusedPiece& p = in.pieces[j];
        std::string element;
        if (contiguous(piece_sizes(k, in, p), p.strides)) {
          element = piece_offset(x, j);
        } else {
          // Through the piece's strides, from the output's coordinates: less the piece's start
          // along the axis.
          const std::string strides = fmt::format("strides{}_{}", x, j);
          body += args->array(strides, p.strides);
          element = fmt::format("{} - {} * {}", index.offset("i", strides),
                                j == 0 ? std::string("0") : pieced[x].end[j - 1],
                                args->value(p.strides[static_cast<size_t>(in.axis)]));
        }
        const std::string one =
            fmt::format("to_f(p{}[{}])", ptr_of[x] + static_cast<int>(j), element);
        read += j + 1 < in.pieces.size() ? fmt::format("c{} < {} ? {} : ", x, pieced[x].end[j], one)
                                         : one;
      }
      loop += fmt::format("    const float {} = {};\n", v, read);
    } else if (in.literal) {
      loop += fmt::format("    const float {} = {};\n", v, float_literal(in.value));
    } else if (contiguous(k.sizes, in.strides)) {
      loop += fmt::format("    const float {} = to_f(p{}[i]);\n", v, ptr_of[x]);
    } else {
      const std::vector<int64_t> strides =
          in.strides.empty() ? std::vector<int64_t>{0} : in.strides;
      body += args->array(fmt::format("strides{}", x), strides);
      loop += fmt::format("    const float {} = to_f(p{}[{}]);\n", v, ptr_of[x],
                          index.offset("i", fmt::format("strides{}", x)));
    }
    names.push_back(v);
  }
  auto operand = [&](int ref) { return ref >= 0 ? names[ref] : fmt::format("t{}", -1 - ref); };
  std::vector<std::string> ops;  // the chain, over v<x> and t<o>, shared by both loops
  for (size_t o = 0; o < k.ops.size(); ++o) {
    const FusedOp& op = k.ops[o];
    const std::string a = operand(op.a), b = operand(op.b);
    ops.push_back(fmt::format("const float t{} = {};\n", o,
                              fmt::format(fmt::runtime(op.expression), fmt::arg("x", a),
                                          fmt::arg("a", a), fmt::arg("b", b))));
  }
  auto indented = [&](const std::string& indent) {
    std::string out;
    for (const std::string& line : ops) out += indent + line;
    return out;
  };
  loop += indented("    ");
  for (size_t o = 0; o < k.outputs.size(); ++o)
    loop += fmt::format("    st(&p{}[i], t{});\n", first_output + o, k.outputs[o].op);
  // The element count, read by both loops (the vector loop divides it by W).
  body += fmt::format("  const long long count = {};\n", args->value(n));
  const std::string scalar_loop =
      fmt::format("  baton_for_each(count, [&](long long i) {{\n{}  }});\n", loop);

  std::vector<VecRead> reads;
  const int w = vector_width(k, &reads);
  if (w == 0) {
    *launch = grid_stride_launch(n);
    return fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}{}) {{\n{}{}{}}}\n",
                       kBlock, k.name, params, args->parameter(), index.declarations(), body,
                       scalar_loop);
  }
  // What vector_width left to the run: W divides the count, and, for reads at an offset, the
  // last dimension and every VectorAt read's outer strides.
  std::string aligned = fmt::format(" && count % {} == 0", w), vload, vbody;
  if (std::any_of(reads.begin(), reads.end(),
                  [](VecRead r) { return r == VecRead::VectorAt || r == VecRead::SplatAt; })) {
    aligned += fmt::format(" && {} % {} == 0", args->value(k.sizes.back()), w);
  }
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    if (reads[x] == VecRead::Pieces) {
      // W elements from i0 lie in one piece, one after another: W divides the elements inside a
      // step of the axis, or there are none (the axis is the last dimension) and W divides every
      // piece's extent (so also where each starts).
      std::string extents;
      for (const std::string& size : pieced[x].size)
        extents += fmt::format(" && {} % {} == 0", size, w);
      aligned += fmt::format(" && ({} % {} == 0 || ({} == 1{}))", pieced[x].inner, w,
                             pieced[x].inner, extents);
      continue;
    }
    if (reads[x] != VecRead::VectorAt) continue;
    for (size_t d = 0; d + 1 < k.sizes.size(); ++d) {
      aligned += fmt::format(" && strides{}[{}] % {} == 0", x, d, w);
    }
  }
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    const int p = ptr_of[x];
    // Only the reads at an offset ask for one (a kernel of contiguous inputs passes no sizes).
    auto at = [&] { return index.offset("i0", fmt::format("strides{}", x)); };
    switch (reads[x]) {
      case VecRead::Literal:
        vbody += fmt::format("      const float v{} = {};\n", x, float_literal(k.inputs[x].value));
        break;
      case VecRead::Vector:
      case VecRead::VectorAt:
        aligned += fmt::format(" && baton_vec_aligned<{}>(p{})", w, p);
        vload += fmt::format("    float a{}[{}];\n    baton_vec_load<{}>(p{} + {}, a{});\n", x, w,
                             w, p, reads[x] == VecRead::Vector ? std::string("i0") : at(), x);
        vbody += fmt::format("      const float v{} = a{}[e];\n", x, x);
        break;
      case VecRead::Splat:
        vload += fmt::format("    const float v{} = to_f(p{}[0]);\n", x, p);
        break;
      case VecRead::SplatAt:
        vload += fmt::format("    const float v{} = to_f(p{}[{}]);\n", x, p, at());
        break;
      case VecRead::Pieces: {
        // One vector load from the piece i0 falls in.
        std::string loads;
        const size_t pieces = k.inputs[x].pieces.size();
        for (size_t j = 0; j < pieces; ++j) {
          aligned += fmt::format(" && baton_vec_aligned<{}>(p{})", w, p + static_cast<int>(j));
          const std::string load = fmt::format("baton_vec_load<{}>(p{} + {}, a{});", w,
                                               p + static_cast<int>(j), piece_offset(x, j), x);
          loads += j + 1 < pieces ? fmt::format("    {}if (c{} < {}) {}\n", j ? "else " : "", x,
                                                pieced[x].end[j], load)
                                  : fmt::format("    {}{}\n", j ? "else " : "", load);
        }
        vload += fmt::format("    float a{}[{}];\n{}{}", x, w, coordinates(x, "i0", "    "), loads);
        vbody += fmt::format("      const float v{} = a{}[e];\n", x, x);
        break;
      }
    }
  }
  std::string vstore;
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    aligned += fmt::format(" && baton_vec_aligned<{}>(p{})", w, first_output + o);
    vload += fmt::format("    float o{}[{}];\n", o, w);
    vstore += fmt::format("      o{}[e] = t{};\n", o, k.outputs[o].op);
  }
  std::string stores;
  for (size_t o = 0; o < k.outputs.size(); ++o)
    stores += fmt::format("    baton_vec_store<{}>(p{} + i0, o{});\n", w, first_output + o, o);
  // Enough blocks for the vector loop, W elements a thread (ceil(ceil(n / W) / block) is
  // ceil(n / (W * block))): the count stays n, a size expression at every size, where n / W is
  // not one when W does not divide n. The scalar loop, when the check fails, strides over them.
  // A static kernel whose count W does not divide runs the scalar loop: a thread per element.
  // A dynamic one keeps the vector loop's grid, which follows the sizes as one expression, and
  // runs its scalar loop at sizes W does not divide with W times fewer threads than elements.
  *launch = n % w == 0 || k.sizes_vary ? vector_launch(n, w) : grid_stride_launch(n);
  const std::string vector_count = fmt::format("count / {}", w);
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}{}) {{\n{}{}"
      "  if (true{}) {{\n"
      "    baton_for_each({}, [&](long long j) {{\n"
      "    const long long i0 = j * {};\n{}"
      "#pragma unroll\n"
      "    for (int e = 0; e < {}; ++e) {{\n{}{}{}    }}\n{}"
      "    }});\n"
      "    return;\n"
      "  }}\n{}}}\n",
      kBlock, k.name, params, args->parameter(), index.declarations(), body, aligned, vector_count,
      w, vload, w, vbody, indented("      "), vstore, stores, scalar_loop);
}

namespace {
std::string generate_row_copy(const TypedKernel& k, const RowPitch& r, LaunchShape* launch,
                              KernelArgs* args) {
  const TypedInput& in = k.inputs[0];
  std::string expression = k.expression;
  const std::string element = "ld(v[j])";
  for (size_t at = expression.find("{0}"); at != std::string::npos;
       at = expression.find("{0}", at + element.size())) {
    expression.replace(at, 3, element);
  }
  const int64_t chunks = (r.cols + kRowCopyCols - 1) / kRowCopyCols;
  launch->block = kBlock;
  launch->grid = static_cast<uint32_t>(r.rows * chunks);
  const std::string cols = args->value(r.cols), pitch = args->value(r.pitch),
                    chunk_count = args->value(chunks), offset = args->value(in.offset);
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ p0, "
      "{3}* __restrict__ y{11}) {{\n"
      "  const long long cols = {4}, pitch = {5};\n"
      "  const unsigned chunks = (unsigned)({6});\n"
      "  const long long row = blockIdx.x / chunks;\n"
      "  const long long c0 = (long long)(blockIdx.x % chunks) * {7}LL + threadIdx.x;\n"
      "  const {2}* __restrict__ x = p0 + {8} + row * pitch;\n"
      "  {3}* __restrict__ out = y + row * cols;\n"
      "  {2} v[{9}];\n"
      "#pragma unroll\n"
      "  for (int j = 0; j < {9}; ++j) {{\n"
      "    if (c0 + j * {0}LL < cols) v[j] = x[c0 + j * {0}LL];\n"
      "  }}\n"
      "#pragma unroll\n"
      "  for (int j = 0; j < {9}; ++j) {{\n"
      "    if (c0 + j * {0}LL < cols) sto(&out[c0 + j * {0}LL], {10});\n"
      "  }}\n"
      "}}\n",
      kBlock, k.name, device_type_name(in.dtype), device_type_name(k.out), cols, pitch, chunk_count,
      kRowCopyCols, offset, kRowCopyUnroll, expression, args->parameter());
}

}  // namespace

std::string generate_typed(const TypedKernel& k, LaunchShape* launch, KernelArgs* args) {
  if (k.inputs.size() == 1 && !contiguous(k.sizes, k.inputs[0].strides)) {
    if (const std::optional<RowPitch> r = row_pitched(k.sizes, k.inputs[0].strides)) {
      return generate_row_copy(k, *r, launch, args);
    }
  }
  int64_t n = 1;
  for (int64_t s : k.sizes) n *= s;
  ElementIndex index(*args, k.sizes);
  std::string params, body;
  std::string expression = k.expression;
  for (size_t x = 0; x < k.inputs.size(); ++x) {
    const TypedInput& in = k.inputs[x];
    params += fmt::format("const {}* __restrict__ p{}, ", device_type_name(in.dtype), x);
    std::string element;
    if (contiguous(k.sizes, in.strides)) {
      element = in.offset ? fmt::format("ld(p{}[{} + i])", x, args->value(in.offset))
                          : fmt::format("ld(p{}[i])", x);
    } else {
      const std::vector<int64_t> strides =
          in.strides.empty() ? std::vector<int64_t>{0} : in.strides;
      body += args->array(fmt::format("strides{}", x), strides);
      element = fmt::format("ld(p{}[{} + {}])", x, args->value(in.offset),
                            index.offset("i", fmt::format("strides{}", x)));
    }
    const std::string placeholder = fmt::format("{{{}}}", x);
    for (size_t at = expression.find(placeholder); at != std::string::npos;
         at = expression.find(placeholder, at + element.size())) {
      expression.replace(at, placeholder.size(), element);
    }
  }
  *launch = grid_stride_launch(n);
  const std::string count = args->value(n);
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}{}* __restrict__ y{}) {{\n{}"
      "  baton_for_each({}, [&](long long i) {{ sto(&y[i], {}); }});\n}}\n",
      kBlock, k.name, params, device_type_name(k.out), args->parameter(),
      index.declarations() + body, count, expression);
}

}  // namespace baton::cuda
