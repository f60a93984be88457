#include "backends/cuda/engine_format.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <optional>

#include "baton/core/check.h"
#include "baton/core/tensor.h"

namespace baton::cuda {
namespace {

// Blobs beyond this are certainly corrupt (and keep every sum below far from overflow).
constexpr uint64_t kMaxBlobBytes = uint64_t{1} << 44;

bool inside(const Section& s, uint64_t size) {
  uint64_t end = 0;
  return !__builtin_add_overflow(s.offset, s.size, &end) && end <= size;
}

class Validator {
 public:
  // `binding_bytes` (one per binding) and `args` replace the blob's own when a call's patched
  // steps are checked (EngineBlob::check_steps).
  explicit Validator(const EngineBlob& blob, std::span<const uint64_t> binding_bytes = {},
                     std::optional<std::span<const int64_t>> args = std::nullopt)
      : blob_(blob),
        h_(blob.header()),
        binding_bytes_(binding_bytes),
        args_(args ? *args : blob.args()) {}

  Status buffer(const BufferRef& ref, const std::string& what) {
    uint64_t end = 0;
    BATON_CHECK_OR_RETURN(!__builtin_add_overflow(ref.offset, ref.bytes, &end), InvalidProgram,
                          "engine blob: {} range overflows", what);
    switch (static_cast<Space>(ref.space)) {
      case Space::Binding: {
        BATON_CHECK_OR_RETURN(ref.index < h_.num_bindings, InvalidProgram,
                              "engine blob: {} names binding {} of {}", what, ref.index,
                              h_.num_bindings);
        const uint64_t size = binding_bytes(ref.index);
        BATON_CHECK_OR_RETURN(end <= size, InvalidProgram,
                              "engine blob: {} bytes [{}, {}) lie outside binding {} ('{}', {} "
                              "bytes)",
                              what, ref.offset, end, ref.index, blob_.binding_name(ref.index),
                              size);
        return Status();
      }
      case Space::Scratch:
        BATON_CHECK_OR_RETURN(end <= h_.scratch_bytes, InvalidProgram,
                              "engine blob: {} bytes [{}, {}) lie outside the {}-byte scratch "
                              "buffer",
                              what, ref.offset, end, h_.scratch_bytes);
        return Status();
      case Space::Weights:
        BATON_CHECK_OR_RETURN(end <= blob_.weights().size(), InvalidProgram,
                              "engine blob: {} bytes [{}, {}) lie outside the {}-byte weights",
                              what, ref.offset, end, blob_.weights().size());
        return Status();
    }
    return BATON_ERROR(InvalidProgram, "engine blob: {} has unknown space {}", what, ref.space);
  }

  uint64_t binding_bytes(uint32_t index) const {
    if (!binding_bytes_.empty()) return binding_bytes_[index];
    const BindingRecord& b = blob_.bindings()[index];
    return *checked_nbytes(static_cast<DType>(b.dtype), {b.sizes, b.rank});
  }

  Status bindings() {
    bool seen_output = false;
    for (uint32_t i = 0; i < h_.num_bindings; ++i) {
      const BindingRecord& b = blob_.bindings()[i];
      const std::string what = fmt::format("bindings[{}]", i);
      BATON_CHECK_OR_RETURN(string_ok(b.name_offset, b.name_size), InvalidProgram,
                            "engine blob: {} name [{}, +{}) lies outside the strings", what,
                            b.name_offset, b.name_size);
      BATON_CHECK_OR_RETURN(is_valid_dtype(b.dtype), InvalidProgram,
                            "engine blob: {} dtype {} is not a known element type", what, b.dtype);
      BATON_CHECK_OR_RETURN(b.rank <= kEngineMaxRank && b.is_output <= 1, InvalidProgram,
                            "engine blob: {} has rank {} / is_output {}", what, b.rank,
                            b.is_output);
      for (uint32_t d = 0; d < b.rank; ++d) {
        BATON_CHECK_OR_RETURN(b.sizes[d] >= 0, InvalidProgram, "engine blob: {} sizes[{}] = {}",
                              what, d, b.sizes[d]);
      }
      BATON_CHECK_OR_RETURN(checked_nbytes(static_cast<DType>(b.dtype), {b.sizes, b.rank}),
                            InvalidProgram, "engine blob: {} size overflows", what);
      BATON_CHECK_OR_RETURN(!(seen_output && !b.is_output), InvalidProgram,
                            "engine blob: {} is an input after an output (inputs come first)",
                            what);
      seen_output = seen_output || b.is_output;
    }
    return Status();
  }

  Status steps(std::span<const StepRecord> list) {
    for (uint32_t i = 0; i < list.size(); ++i) {
      const StepRecord& s = list[i];
      const std::string what = fmt::format("steps[{}]", i);
      switch (static_cast<StepKind>(s.kind)) {
        case StepKind::Gemm:
          BATON_CHECK_OR_RETURN(s.gemm.epilogue != static_cast<uint8_t>(GemmEpilogue::BiasGeluErf),
                                InvalidProgram,
                                "engine blob: {} asks cuBLASLt for the erf-GELU epilogue, which "
                                "only cuDNN matmul steps have",
                                what);
          BATON_TRY(gemm(s.gemm, what));
          break;
        case StepKind::Matmul: {
          // What cuDNN's matmul graph takes (cudnn_graph.cpp): one batch, no C, one operand
          // dtype, alpha 1, and no epilogue but none, bias or bias+gelu.
          const GemmStep& g = s.gemm;
          BATON_CHECK_OR_RETURN(g.batch == 1, InvalidProgram,
                                "engine blob: {} is a cuDNN matmul of {} batches (only 1)", what,
                                g.batch);
          BATON_CHECK_OR_RETURN(g.has_c == 0, InvalidProgram,
                                "engine blob: {} is a cuDNN matmul with a C matrix (has_c {})",
                                what, g.has_c);
          BATON_CHECK_OR_RETURN(g.a_dtype == g.b_dtype && g.a_dtype == g.d_dtype, InvalidProgram,
                                "engine blob: {} is a cuDNN matmul of mixed operand dtypes (A {}, "
                                "B {}, D {})",
                                what, g.a_dtype, g.b_dtype, g.d_dtype);
          BATON_CHECK_OR_RETURN(g.alpha == 1.0f, InvalidProgram,
                                "engine blob: {} is a cuDNN matmul with an alpha other than 1 ({})",
                                what, g.alpha);
          BATON_CHECK_OR_RETURN(
              g.epilogue == static_cast<uint8_t>(GemmEpilogue::None) ||
                  g.epilogue == static_cast<uint8_t>(GemmEpilogue::Bias) ||
                  g.epilogue == static_cast<uint8_t>(GemmEpilogue::BiasGeluErf),
              InvalidProgram,
              "engine blob: {} is a cuDNN matmul with epilogue {}: an epilogue other than none, "
              "bias or bias+gelu",
              what, g.epilogue);
          BATON_TRY(gemm(g, what));
          break;
        }
        case StepKind::Conv:
          BATON_TRY(conv(s.conv, what));
          break;
        case StepKind::Sdpa:
          BATON_TRY(sdpa(s.sdpa, what));
          break;
        case StepKind::Kernel: {
          const KernelStep& k = s.kernel;
          BATON_CHECK_OR_RETURN(k.kernel < h_.num_kernels, InvalidProgram,
                                "engine blob: {} launches kernel {} of {}", what, k.kernel,
                                h_.num_kernels);
          BATON_CHECK_OR_RETURN(k.num_operands <= kMaxKernelOperands, InvalidProgram,
                                "engine blob: {} has {} operands (at most {})", what,
                                k.num_operands, kMaxKernelOperands);
          for (int d = 0; d < 3; ++d) {
            BATON_CHECK_OR_RETURN(
                k.grid[d] >= 1 && k.block[d] >= 1 && k.block[d] <= 1024, InvalidProgram,
                "engine blob: {} has launch shape {}x{}x{} / {}x{}x{}", what, k.grid[0], k.grid[1],
                k.grid[2], k.block[0], k.block[1], k.block[2]);
          }
          BATON_CHECK_OR_RETURN(k.shared_bytes <= 228 * 1024, InvalidProgram,
                                "engine blob: {} asks for {} bytes of shared memory", what,
                                k.shared_bytes);
          for (uint32_t o = 0; o < k.num_operands; ++o) {
            BATON_TRY(buffer(k.operands[o], fmt::format("{} operand {}", what, o)));
          }
          const KernelRecord& kernel = blob_.kernels()[k.kernel];
          BATON_CHECK_OR_RETURN(
              k.num_operands == kernel.num_pointers && k.num_args == kernel.num_args,
              InvalidProgram,
              "engine blob: {} passes {} pointers and {} arguments to kernel {}, which takes {} "
              "and {}",
              what, k.num_operands, k.num_args, k.kernel, kernel.num_pointers, kernel.num_args);
          BATON_CHECK_OR_RETURN(
              k.num_args <= kMaxKernelArgs && k.first_arg <= args_.size() &&
                  k.num_args <= args_.size() - k.first_arg,
              InvalidProgram,
              "engine blob: {} passes arguments [{}, +{}) of the {} in the args section (at most "
              "{} per kernel)",
              what, k.first_arg, k.num_args, args_.size(), kMaxKernelArgs);
          break;
        }
        case StepKind::Copy: {
          const BufferRef& src = s.copy.src;
          const BufferRef& dst = s.copy.dst;
          BATON_TRY(buffer(src, what + " source"));
          BATON_TRY(buffer(dst, what + " destination"));
          BATON_CHECK_OR_RETURN(src.bytes == dst.bytes, InvalidProgram,
                                "engine blob: {} copies {} bytes into {}", what, src.bytes,
                                dst.bytes);
          // buffer() checked both ends, so these sums do not overflow.
          const bool same_buffer =
              src.space == dst.space &&
              (static_cast<Space>(src.space) != Space::Binding || src.index == dst.index);
          BATON_CHECK_OR_RETURN(!same_buffer || src.bytes == 0 ||
                                    src.offset + src.bytes <= dst.offset ||
                                    dst.offset + dst.bytes <= src.offset,
                                InvalidProgram,
                                "engine blob: {} copies bytes [{}, +{}) onto the overlapping "
                                "[{}, +{}) of the same buffer",
                                what, src.offset, src.bytes, dst.offset, dst.bytes);
          break;
        }
        default:
          return BATON_ERROR(InvalidProgram, "engine blob: {} has unknown kind {}", what, s.kind);
      }
    }
    return Status();
  }

  Status gemm(const GemmStep& g, const std::string& what) {
    for (uint8_t dt : {g.a_dtype, g.b_dtype, g.c_dtype, g.d_dtype}) {
      BATON_CHECK_OR_RETURN(dt == static_cast<uint8_t>(DType::Float32) ||
                                dt == static_cast<uint8_t>(DType::Float16) ||
                                dt == static_cast<uint8_t>(DType::BFloat16),
                            InvalidProgram, "engine blob: {} has operand dtype {}", what, dt);
    }
    BATON_CHECK_OR_RETURN(g.m > 0 && g.n > 0 && g.k > 0 && g.batch >= 1 &&
                              g.m < (int64_t{1} << 31) && g.n < (int64_t{1} << 31) &&
                              g.k < (int64_t{1} << 31),
                          InvalidProgram, "engine blob: {} has m={} n={} k={} batch={}", what, g.m,
                          g.n, g.k, g.batch);
    BATON_CHECK_OR_RETURN(g.trans_a <= 1 && g.trans_b <= 1 && g.has_c <= 1 &&
                              g.epilogue <= kMaxGemmEpilogue && g.compute <= 3 &&
                              g.batch <= (1u << 24),
                          InvalidProgram, "engine blob: {} has invalid flags", what);
    // Extents of each operand as cuBLASLt will touch them.
    const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    BATON_TRY(matrix(g.a, g.a_dtype, a_rows, a_cols, g.lda, g.stride_a, g.batch, what + " A"));
    BATON_TRY(matrix(g.b, g.b_dtype, b_rows, b_cols, g.ldb, g.stride_b, g.batch, what + " B"));
    BATON_TRY(matrix(g.d, g.d_dtype, g.m, g.n, g.ldd, g.stride_d, g.batch, what + " D"));
    if (g.has_c)
      BATON_TRY(matrix(g.c, g.c_dtype, g.m, g.n, g.ldc, g.stride_c, g.batch, what + " C"));
    if (epilogue_has_bias(static_cast<GemmEpilogue>(g.epilogue))) {
      BATON_TRY(buffer(g.bias, what + " bias"));
      BATON_CHECK_OR_RETURN(is_valid_dtype(g.bias_dtype) &&
                                g.bias.bytes >= static_cast<uint64_t>(g.m) *
                                                    dtype_size(static_cast<DType>(g.bias_dtype)),
                            InvalidProgram,
                            "engine blob: {} bias of {} bytes (dtype {}) is too short for m={}",
                            what, g.bias.bytes, g.bias_dtype, g.m);
    }
    return Status();
  }

  Status conv(const ConvStep& c, const std::string& what) {
    for (uint8_t dt : {c.x_dtype, c.w_dtype, c.y_dtype}) {
      BATON_CHECK_OR_RETURN(dt == static_cast<uint8_t>(DType::Float32) ||
                                dt == static_cast<uint8_t>(DType::Float16) ||
                                dt == static_cast<uint8_t>(DType::BFloat16),
                            InvalidProgram, "engine blob: {} has tensor dtype {}", what, dt);
    }
    constexpr int64_t kMax = int64_t{1} << 24;
    const int64_t dims[] = {c.n,        c.c,        c.k,          c.groups,    c.in_h,
                            c.in_w,     c.out_h,    c.out_w,      c.kernel_h,  c.kernel_w,
                            c.stride_h, c.stride_w, c.dilation_h, c.dilation_w};
    for (int64_t d : dims) {
      BATON_CHECK_OR_RETURN(d >= 1 && d <= kMax, InvalidProgram,
                            "engine blob: {} has a dimension {} outside [1, 2^24]", what, d);
    }
    for (int64_t p : {c.pad_top, c.pad_left, c.pad_bottom, c.pad_right}) {
      BATON_CHECK_OR_RETURN(p >= 0 && p <= kMax, InvalidProgram, "engine blob: {} has padding {}",
                            what, p);
    }
    BATON_CHECK_OR_RETURN(
        c.c % c.groups == 0 && c.k % c.groups == 0 && c.has_bias <= 1 && c.has_residual <= 1 &&
            c.activation <= kMaxConvActivation && c.compute <= 3,
        InvalidProgram, "engine blob: {} has C={} K={} groups={} or invalid flags", what, c.c, c.k,
        c.groups);
    BATON_CHECK_OR_RETURN(std::isfinite(c.act_alpha) && std::isfinite(c.act_beta), InvalidProgram,
                          "engine blob: {} has activation parameters {} and {}", what, c.act_alpha,
                          c.act_beta);
    // Every extent below is a product of values <= 2^24 in at most 4 factors of which two are
    // spatial: N*H*W*C fits in 2^96 only in theory, so check with overflow builtins.
    auto tensor = [&](const BufferRef& ref, uint8_t dtype, std::initializer_list<int64_t> sizes,
                      const char* name) -> Status {
      BATON_TRY(buffer(ref, fmt::format("{} {}", what, name)));
      uint64_t need = dtype_size(static_cast<DType>(dtype));
      bool overflow = false;
      for (int64_t d : sizes) overflow = overflow || __builtin_mul_overflow(need, d, &need);
      BATON_CHECK_OR_RETURN(!overflow && need <= ref.bytes, InvalidProgram,
                            "engine blob: {} {} needs {} bytes but its range has {}", what, name,
                            overflow ? "more than 2^64" : std::to_string(need), ref.bytes);
      return Status();
    };
    BATON_TRY(tensor(c.x, c.x_dtype, {c.n, c.in_h, c.in_w, c.c}, "x"));
    BATON_TRY(tensor(c.w, c.w_dtype, {c.k, c.kernel_h, c.kernel_w, c.c / c.groups}, "w"));
    BATON_CHECK_OR_RETURN(
        c.y_channel_stride == 0 || (c.y_channel_stride >= c.k && c.y_channel_stride <= kMax),
        InvalidProgram, "engine blob: {} has y channel stride {} for K={}", what,
        c.y_channel_stride, c.k);
    // y, from the first pixel's first channel to the last pixel's K-th, pixels conv_y_pitch apart
    // (N*H*W*K when packed).
    int64_t span = 0;
    const bool overflow = __builtin_mul_overflow(c.n, c.out_h, &span) ||
                          __builtin_mul_overflow(span, c.out_w, &span) ||
                          __builtin_mul_overflow(span - 1, conv_y_pitch(c), &span) ||
                          __builtin_add_overflow(span, c.k, &span);
    BATON_CHECK_OR_RETURN(!overflow, InvalidProgram,
                          "engine blob: {} y needs more than 2^64 bytes but its range has {}", what,
                          c.y.bytes);
    BATON_TRY(tensor(c.y, c.y_dtype, {span}, "y"));
    if (c.has_bias) {
      BATON_CHECK_OR_RETURN(is_valid_dtype(c.bias_dtype), InvalidProgram,
                            "engine blob: {} bias dtype {}", what, c.bias_dtype);
      BATON_TRY(tensor(c.bias, c.bias_dtype, {c.k}, "bias"));
    }
    if (c.has_residual)
      BATON_TRY(tensor(c.residual, c.y_dtype, {c.n, c.out_h, c.out_w, c.k}, "residual"));
    return Status();
  }

  Status sdpa(const SdpaStep& a, const std::string& what) {
    BATON_CHECK_OR_RETURN(a.dtype == static_cast<uint8_t>(DType::Float16) ||
                              a.dtype == static_cast<uint8_t>(DType::BFloat16),
                          InvalidProgram, "engine blob: {} has attention dtype {}", what, a.dtype);
    BATON_CHECK_OR_RETURN(
        a.mask <= kMaxSdpaMask && a.bias_batch <= 1 && a.bias_heads <= 1 && std::isfinite(a.scale),
        InvalidProgram, "engine blob: {} has mask {} or scale {}", what, a.mask, a.scale);
    constexpr uint32_t kMax = uint32_t{1} << 24;
    for (uint32_t d : {a.b, a.h, a.sq, a.sk, a.d, a.dv}) {
      BATON_CHECK_OR_RETURN(d >= 1 && d <= kMax, InvalidProgram,
                            "engine blob: {} has a dimension {} outside [1, 2^24]", what, d);
    }
    // [B, H, S, last] through (batch, head, sequence) strides, the last dimension contiguous.
    auto tensor = [&](const BufferRef& ref, const int64_t(&st)[3], uint32_t s, uint32_t last,
                      const char* name) -> Status {
      BATON_TRY(buffer(ref, fmt::format("{} {}", what, name)));
      uint64_t elements = last, span = 0;
      bool overflow = false;
      const uint32_t dims[3] = {a.b, a.h, s};
      for (int i = 0; i < 3; ++i) {
        BATON_CHECK_OR_RETURN(st[i] >= 0 && st[i] < (int64_t{1} << 40), InvalidProgram,
                              "engine blob: {} {} has stride {}", what, name, st[i]);
        overflow = overflow ||
                   __builtin_mul_overflow(static_cast<uint64_t>(st[i]), dims[i] - 1, &span) ||
                   __builtin_add_overflow(elements, span, &elements);
      }
      uint64_t need = 0;
      overflow = overflow || __builtin_mul_overflow(elements, uint64_t{2}, &need);
      BATON_CHECK_OR_RETURN(!overflow && need <= ref.bytes, InvalidProgram,
                            "engine blob: {} {} needs {} bytes but its range has {}", what, name,
                            overflow ? "more than 2^64" : std::to_string(need), ref.bytes);
      return Status();
    };
    BATON_TRY(tensor(a.q, a.q_strides, a.sq, a.d, "q"));
    BATON_TRY(tensor(a.k, a.k_strides, a.sk, a.d, "k"));
    BATON_TRY(tensor(a.v, a.v_strides, a.sk, a.dv, "v"));
    BATON_TRY(tensor(a.o, a.o_strides, a.sq, a.dv, "o"));
    if (static_cast<SdpaMask>(a.mask) == SdpaMask::Bias) {
      // Contiguous [B or 1, H or 1, Sq, Sk].
      BATON_TRY(buffer(a.bias, what + " bias"));
      uint64_t need = 2;
      bool overflow = false;
      for (uint64_t d : {uint64_t{a.bias_batch ? a.b : 1u}, uint64_t{a.bias_heads ? a.h : 1u},
                         uint64_t{a.sq}, uint64_t{a.sk}}) {
        overflow = overflow || __builtin_mul_overflow(need, d, &need);
      }
      BATON_CHECK_OR_RETURN(!overflow && need <= a.bias.bytes, InvalidProgram,
                            "engine blob: {} bias needs {} bytes but its range has {}", what,
                            overflow ? "more than 2^64" : std::to_string(need), a.bias.bytes);
    }
    return Status();
  }

  // Column-major rows x cols with leading dimension ld, `batch` matrices `stride` elements apart.
  // The last element cuBLASLt touches is (batch - 1) * stride + (cols - 1) * ld + rows - 1, and
  // every product and sum on the way is checked: values that wrap around 2^64 (a stride of 2^39
  // times millions of batches) would otherwise pass and send cuBLASLt out of bounds.
  Status matrix(const BufferRef& ref, uint8_t dtype, int64_t rows, int64_t cols, int64_t ld,
                int64_t stride, uint32_t batch, const std::string& what) {
    BATON_TRY(buffer(ref, what));
    BATON_CHECK_OR_RETURN(rows > 0 && cols > 0 && batch >= 1 && ld >= rows &&
                              ld < (int64_t{1} << 40) && stride >= 0 && stride < (int64_t{1} << 40),
                          InvalidProgram, "engine blob: {} has ld {} for {} rows, stride {}", what,
                          ld, rows, stride);
    uint64_t batches_span = 0, columns_span = 0, elements = 0, need = 0;
    const bool overflows =
        __builtin_mul_overflow(static_cast<uint64_t>(stride), uint64_t{batch} - 1, &batches_span) ||
        __builtin_mul_overflow(static_cast<uint64_t>(ld), static_cast<uint64_t>(cols - 1),
                               &columns_span) ||
        __builtin_add_overflow(batches_span, columns_span, &elements) ||
        __builtin_add_overflow(elements, static_cast<uint64_t>(rows), &elements) ||
        __builtin_mul_overflow(elements, uint64_t{dtype_size(static_cast<DType>(dtype))}, &need);
    BATON_CHECK_OR_RETURN(!overflows, InvalidProgram,
                          "engine blob: {} spans more than 2^64 bytes ({} rows, {} columns, ld {}, "
                          "{} batches {} elements apart)",
                          what, rows, cols, ld, batch, stride);
    BATON_CHECK_OR_RETURN(need <= ref.bytes, InvalidProgram,
                          "engine blob: {} needs {} bytes ({} rows, {} columns, ld {}, {} batches "
                          "{} elements apart) but its range has {}",
                          what, need, rows, cols, ld, batch, stride, ref.bytes);
    return Status();
  }

  // Each choice names a distinct GEMM or Conv step of its own kind; names are NUL-terminated.
  Status choices(std::vector<int32_t>* choice_of_step) {
    choice_of_step->assign(h_.num_steps, -1);
    BATON_CHECK_OR_RETURN(
        std::memchr(h_.choices_gpu, 0, sizeof h_.choices_gpu) != nullptr, InvalidProgram,
        "engine blob: the name of the GPU its choices were timed on is not NUL-terminated");
    for (size_t i = 0; i < blob_.choices().size(); ++i) {
      const StepChoice& c = blob_.choices()[i];
      BATON_CHECK_OR_RETURN(c.step < h_.num_steps, InvalidProgram,
                            "engine blob: choices[{}] names step {} of {}", i, c.step,
                            h_.num_steps);
      const uint32_t kind = blob_.steps()[c.step].kind;
      BATON_CHECK_OR_RETURN(
          c.kind == kind && (kind == static_cast<uint32_t>(StepKind::Gemm) || is_cudnn_step(kind)),
          InvalidProgram,
          "engine blob: choices[{}] is for a step of kind {} but steps[{}] is of kind {} (only "
          "GEMM, convolution and attention steps have choices)",
          i, c.kind, c.step, kind);
      BATON_CHECK_OR_RETURN(std::memchr(c.cudnn_plan, 0, sizeof c.cudnn_plan) != nullptr,
                            InvalidProgram,
                            "engine blob: choices[{}]'s cuDNN plan name is not NUL-terminated", i);
      BATON_CHECK_OR_RETURN((*choice_of_step)[c.step] < 0, InvalidProgram,
                            "engine blob: choices[{}] is a second choice for steps[{}]", i, c.step);
      (*choice_of_step)[c.step] = static_cast<int32_t>(i);
    }
    return Status();
  }

  Status kernels() {
    for (uint32_t i = 0; i < h_.num_kernels; ++i) {
      const KernelRecord& k = blob_.kernels()[i];
      BATON_CHECK_OR_RETURN(string_ok(k.name_offset, k.name_size) && k.name_size > 0,
                            InvalidProgram, "engine blob: kernels[{}] name is outside the strings",
                            i);
      BATON_CHECK_OR_RETURN(k.num_pointers <= kMaxKernelOperands && k.num_args <= kMaxKernelArgs,
                            InvalidProgram,
                            "engine blob: kernels[{}] takes {} pointers and {} arguments (at most "
                            "{} and {})",
                            i, k.num_pointers, k.num_args, kMaxKernelOperands, kMaxKernelArgs);
    }
    return Status();
  }

  bool string_ok(uint32_t offset, uint32_t size) const {
    return static_cast<uint64_t>(offset) + size <= h_.strings.size;
  }

  // A dynamic engine's symbols, expressions and patches. The engine as stored is the engine at
  // the symbols' maxima, so every patch, evaluated there, must give the value already in place:
  // otherwise the steps checked above would not be the steps a call at the maxima runs.
  Status dynamic() {
    const auto symbols = blob_.symbols();
    const auto exprs = blob_.exprs();
    for (size_t i = 0; i < symbols.size(); ++i) {
      const SymbolRecord& s = symbols[i];
      BATON_CHECK_OR_RETURN(string_ok(s.name_offset, s.name_size) && s.name_size > 0,
                            InvalidProgram, "engine blob: symbols[{}] name is outside the strings",
                            i);
      BATON_CHECK_OR_RETURN(s.min >= 1 && s.min <= s.max && s.max < (int64_t{1} << 40) &&
                                (s.opt == 0 || (s.opt >= s.min && s.opt <= s.max)),
                            InvalidProgram,
                            "engine blob: symbols[{}] has range {}..{} (opt {}): not 1 <= min <= "
                            "max < 2^40",
                            i, s.min, s.max, s.opt);
    }
    for (size_t i = 0; i < exprs.size(); ++i) {
      const ExprRecord& e = exprs[i];
      BATON_CHECK_OR_RETURN(e.op <= kMaxExprOp, InvalidProgram,
                            "engine blob: exprs[{}] has unknown operation {}", i, e.op);
      const auto op = static_cast<ExprOp>(e.op);
      if (op == ExprOp::Symbol) {
        BATON_CHECK_OR_RETURN(e.value >= 0 && static_cast<uint64_t>(e.value) < symbols.size(),
                              InvalidProgram, "engine blob: exprs[{}] names symbol {} of {}", i,
                              e.value, symbols.size());
      } else if (op != ExprOp::Const) {
        BATON_CHECK_OR_RETURN(e.a < i && e.b < i, InvalidProgram,
                              "engine blob: exprs[{}] reads exprs[{}] and exprs[{}]: operands "
                              "must come before the expressions that read them",
                              i, e.a, e.b);
      }
    }
    std::vector<int64_t> at_max(symbols.size()), values(exprs.size());
    for (size_t i = 0; i < symbols.size(); ++i) at_max[i] = symbols[i].max;
    BATON_TRY(evaluate_exprs(exprs, at_max, values));
    for (size_t i = 0; i < blob_.patches().size(); ++i) {
      const PatchRecord& p = blob_.patches()[i];
      const std::string what = fmt::format("patches[{}]", i);
      BATON_CHECK_OR_RETURN(p.expr < exprs.size(), InvalidProgram,
                            "engine blob: {} reads exprs[{}] of {}", what, p.expr, exprs.size());
      BATON_CHECK_OR_RETURN(p.kind <= 1 && (p.kind == 0 || p.target == 1), InvalidProgram,
                            "engine blob: {} has kind {} for target {} (division magics only "
                            "for kernel arguments)",
                            what, p.kind, p.target);
      int64_t want = values[p.expr];
      if (static_cast<PatchKind>(p.kind) == PatchKind::DivisionMagic) {
        want = division_magic(want);
      }
      int64_t stored = 0;
      switch (static_cast<PatchTarget>(p.target)) {
        case PatchTarget::StepField: {
          BATON_CHECK_OR_RETURN(
              p.index < h_.num_steps &&
                  patchable_step_field(blob_.steps()[p.index].kind, p.offset, p.width),
              InvalidProgram,
              "engine blob: {} writes {} bytes at offset {} of steps[{}], not a "
              "size, stride, grid or range of that step",
              what, p.width, p.offset, p.index);
          const auto* bytes = reinterpret_cast<const uint8_t*>(&blob_.steps()[p.index]);
          if (p.width == 4) {
            uint32_t v = 0;
            std::memcpy(&v, bytes + p.offset, 4);
            stored = v;
          } else {
            std::memcpy(&stored, bytes + p.offset, 8);
          }
          break;
        }
        case PatchTarget::Arg:
          BATON_CHECK_OR_RETURN(p.index < blob_.args().size() && p.width == 8, InvalidProgram,
                                "engine blob: {} writes argument {} of {} ({} bytes)", what,
                                p.index, blob_.args().size(), p.width);
          stored = blob_.args()[p.index];
          break;
        case PatchTarget::BindingSize:
          BATON_CHECK_OR_RETURN(p.index < h_.num_bindings &&
                                    p.offset < blob_.bindings()[p.index].rank && p.width == 8,
                                InvalidProgram, "engine blob: {} writes dimension {} of binding {}",
                                what, p.offset, p.index);
          stored = blob_.bindings()[p.index].sizes[p.offset];
          break;
        default:
          return BATON_ERROR(InvalidProgram, "engine blob: {} has unknown target {}", what,
                             p.target);
      }
      BATON_CHECK_OR_RETURN(stored == want, InvalidProgram,
                            "engine blob: {} gives {} at the symbols' maxima but the engine holds "
                            "{} there",
                            what, want, stored);
    }
    return Status();
  }

  const EngineBlob& blob_;
  const EngineHeader& h_;
  std::span<const uint64_t> binding_bytes_;
  std::span<const int64_t> args_;
};

struct FieldName {
  uint32_t offset;
  uint32_t width;
  std::string name;
};

// The patchable fields of each step kind (patchable_step_field), by byte offset in StepRecord.
const std::vector<FieldName>& patchable_fields(StepKind kind) {
  static const auto make = [](StepKind k) {
    std::vector<FieldName> f;
    const uint32_t base = offsetof(StepRecord, gemm);  // every member of the union starts here
    auto add = [&](uint32_t off, uint32_t width, std::string name) {
      f.push_back({base + off, width, std::move(name)});
    };
    auto ref = [&](uint32_t off, const std::string& name) {
      add(off + offsetof(BufferRef, offset), 8, name + ".offset");
      add(off + offsetof(BufferRef, bytes), 8, name + ".bytes");
    };
    switch (k) {
      case StepKind::Gemm:
      case StepKind::Matmul:
        add(offsetof(GemmStep, batch), 4, "batch");
        add(offsetof(GemmStep, m), 8, "m");
        add(offsetof(GemmStep, n), 8, "n");
        add(offsetof(GemmStep, k), 8, "k");
        add(offsetof(GemmStep, lda), 8, "lda");
        add(offsetof(GemmStep, ldb), 8, "ldb");
        add(offsetof(GemmStep, ldc), 8, "ldc");
        add(offsetof(GemmStep, ldd), 8, "ldd");
        add(offsetof(GemmStep, stride_a), 8, "stride_a");
        add(offsetof(GemmStep, stride_b), 8, "stride_b");
        add(offsetof(GemmStep, stride_c), 8, "stride_c");
        add(offsetof(GemmStep, stride_d), 8, "stride_d");
        ref(offsetof(GemmStep, a), "a");
        ref(offsetof(GemmStep, b), "b");
        ref(offsetof(GemmStep, c), "c");
        ref(offsetof(GemmStep, d), "d");
        ref(offsetof(GemmStep, bias), "bias");
        break;
      case StepKind::Kernel:
        for (uint32_t d = 0; d < 3; ++d) {
          add(offsetof(KernelStep, grid) + 4 * d, 4, fmt::format("grid[{}]", d));
        }
        for (uint32_t o = 0; o < kMaxKernelOperands; ++o) {
          ref(offsetof(KernelStep, operands) + o * sizeof(BufferRef),
              fmt::format("operands[{}]", o));
        }
        break;
      case StepKind::Copy:
        ref(offsetof(CopyStep, src), "src");
        ref(offsetof(CopyStep, dst), "dst");
        break;
      case StepKind::Conv:
        add(offsetof(ConvStep, n), 8, "n");
        add(offsetof(ConvStep, in_h), 8, "in_h");
        add(offsetof(ConvStep, in_w), 8, "in_w");
        add(offsetof(ConvStep, out_h), 8, "out_h");
        add(offsetof(ConvStep, out_w), 8, "out_w");
        ref(offsetof(ConvStep, x), "x");
        ref(offsetof(ConvStep, residual), "residual");
        ref(offsetof(ConvStep, y), "y");
        break;
      case StepKind::Sdpa:
        add(offsetof(SdpaStep, b), 4, "b");
        add(offsetof(SdpaStep, h), 4, "h");
        add(offsetof(SdpaStep, sq), 4, "sq");
        add(offsetof(SdpaStep, sk), 4, "sk");
        for (uint32_t i = 0; i < 3; ++i) {
          add(offsetof(SdpaStep, q_strides) + 8 * i, 8, fmt::format("q_strides[{}]", i));
          add(offsetof(SdpaStep, k_strides) + 8 * i, 8, fmt::format("k_strides[{}]", i));
          add(offsetof(SdpaStep, v_strides) + 8 * i, 8, fmt::format("v_strides[{}]", i));
          add(offsetof(SdpaStep, o_strides) + 8 * i, 8, fmt::format("o_strides[{}]", i));
        }
        ref(offsetof(SdpaStep, q), "q");
        ref(offsetof(SdpaStep, k), "k");
        ref(offsetof(SdpaStep, v), "v");
        ref(offsetof(SdpaStep, o), "o");
        ref(offsetof(SdpaStep, bias), "bias");
        break;
    }
    return f;
  };
  static const std::vector<FieldName> tables[] = {{},
                                                  make(StepKind::Gemm),
                                                  make(StepKind::Kernel),
                                                  make(StepKind::Copy),
                                                  make(StepKind::Conv),
                                                  make(StepKind::Sdpa),
                                                  make(StepKind::Matmul)};
  static const std::vector<FieldName> none;
  const auto k = static_cast<uint32_t>(kind);
  return k < std::size(tables) ? tables[k] : none;
}

}  // namespace

bool patchable_step_field(uint32_t kind, uint32_t offset, uint32_t width) {
  for (const FieldName& f : patchable_fields(static_cast<StepKind>(kind))) {
    if (f.offset == offset && f.width == width) return true;
  }
  return false;
}

std::vector<std::pair<uint32_t, uint32_t>> patchable_step_fields(uint32_t kind) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const FieldName& f : patchable_fields(static_cast<StepKind>(kind))) {
    out.emplace_back(f.offset, f.width);
  }
  return out;
}

std::string step_field_name(uint32_t kind, uint32_t offset) {
  for (const FieldName& f : patchable_fields(static_cast<StepKind>(kind))) {
    if (f.offset == offset) {
      return fmt::format("{}.{}", step_kind_name(static_cast<StepKind>(kind)), f.name);
    }
  }
  return fmt::format("{}+{}", step_kind_name(static_cast<StepKind>(kind)), offset);
}

int64_t division_magic(int64_t divisor) {
  if (divisor <= 1) return 0;
  // Every numerator is below 2^31, so a divisor of 2^31 or more gives 0: multiplier 0 (and a
  // shift of 1, since magic 0 means a divisor of 1). The formula below would shift by 64 or more
  // (undefined) for such divisors, which a dynamic builder's probe or a damaged blob can ask for.
  if (divisor >= (int64_t{1} << 31)) return int64_t{1} << 32;
  // The multiplier is 2^p / divisor rounded up with p = 31 + ceil(log2(divisor)): then the error
  // of the rounding, times any numerator below 2^31, stays below 2^p, and the quotient is exact.
  int log2_up = 0;
  while ((int64_t{1} << log2_up) < divisor) ++log2_up;
  const int p = 31 + log2_up;
  const uint64_t multiplier =
      ((uint64_t{1} << p) + static_cast<uint64_t>(divisor) - 1) / static_cast<uint64_t>(divisor);
  return static_cast<int64_t>((multiplier & 0xffffffffu) | (uint64_t(p - 32) << 32));
}

Status evaluate_exprs(std::span<const ExprRecord> exprs, std::span<const int64_t> symbols,
                      std::span<int64_t> out) {
  for (size_t i = 0; i < exprs.size(); ++i) {
    const ExprRecord& e = exprs[i];
    int64_t v = 0;
    bool ok = true;
    switch (static_cast<ExprOp>(e.op)) {
      case ExprOp::Const:
        v = e.value;
        break;
      case ExprOp::Symbol:
        ok = e.value >= 0 && static_cast<uint64_t>(e.value) < symbols.size();
        if (ok) v = symbols[static_cast<size_t>(e.value)];
        break;
      case ExprOp::Add:
        ok = e.a < i && e.b < i && !__builtin_add_overflow(out[e.a], out[e.b], &v);
        break;
      case ExprOp::Mul:
        ok = e.a < i && e.b < i && !__builtin_mul_overflow(out[e.a], out[e.b], &v);
        break;
      case ExprOp::FloorDiv:
      case ExprOp::CeilDiv: {
        ok = e.a < i && e.b < i && out[e.b] > 0 && out[e.a] >= 0;
        if (!ok) break;
        const int64_t x = out[e.a], d = out[e.b];
        v = x / d + (static_cast<ExprOp>(e.op) == ExprOp::CeilDiv && x % d != 0 ? 1 : 0);
        break;
      }
      case ExprOp::Min:
        ok = e.a < i && e.b < i;
        if (ok) v = std::min(out[e.a], out[e.b]);
        break;
      case ExprOp::Max:
        ok = e.a < i && e.b < i;
        if (ok) v = std::max(out[e.a], out[e.b]);
        break;
      default:
        ok = false;
    }
    BATON_CHECK_OR_RETURN(ok, InvalidArgument,
                          "engine size expression {} (operation {}) overflows, divides by a "
                          "non-positive value or reads a later expression",
                          i, e.op);
    out[i] = v;
  }
  return Status();
}

Result<std::vector<std::span<const uint8_t>>> engine_buckets(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(BucketsHeader) || std::memcmp(bytes.data(), kBucketsMagic, 8) != 0) {
    return std::vector<std::span<const uint8_t>>{bytes};
  }
  BucketsHeader h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  BATON_CHECK_OR_RETURN(h.version == 1 && h.count >= 1 && h.count <= kMaxBuckets &&
                            h.blob_size == bytes.size() &&
                            sizeof h + uint64_t{h.count} * sizeof(BucketRecord) <= bytes.size(),
                        InvalidProgram,
                        "bucketed engine blob: version {}, {} buckets, {} bytes of {}: not 1 to {} "
                        "buckets in a whole blob",
                        h.version, h.count, h.blob_size, bytes.size(), kMaxBuckets);
  BATON_CHECK_OR_RETURN((h.weights.size == 0 && h.weights.offset == 0) ||
                            (inside(h.weights, bytes.size()) && h.weights.offset % 64 == 0),
                        InvalidProgram,
                        "bucketed engine blob: shared weights [{}, +{}) are misaligned or outside "
                        "the {}-byte blob",
                        h.weights.offset, h.weights.size, bytes.size());
  std::vector<std::span<const uint8_t>> out;
  for (uint32_t i = 0; i < h.count; ++i) {
    BucketRecord r{};
    std::memcpy(&r, bytes.data() + sizeof h + i * sizeof r, sizeof r);
    BATON_CHECK_OR_RETURN(inside(Section{r.offset, r.size}, bytes.size()) && r.offset % 64 == 0 &&
                              r.offset >= sizeof h + uint64_t{h.count} * sizeof(BucketRecord),
                          InvalidProgram,
                          "bucketed engine blob: bucket {} [{}, +{}) is misaligned or outside the "
                          "{}-byte blob",
                          i, r.offset, r.size, bytes.size());
    out.push_back(bytes.subspan(r.offset, r.size));
  }
  return out;
}

std::span<const uint8_t> shared_bucket_weights(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(BucketsHeader) || std::memcmp(bytes.data(), kBucketsMagic, 8) != 0) {
    return {};
  }
  BucketsHeader h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.weights.size == 0 || !inside(h.weights, bytes.size())) return {};
  return bytes.subspan(h.weights.offset, h.weights.size);
}

std::vector<uint8_t> write_buckets(const std::vector<std::vector<uint8_t>>& blobs,
                                   bool share_first_weights) {
  BucketsHeader h{};
  std::memcpy(h.magic, kBucketsMagic, 8);
  h.version = 1;
  h.count = static_cast<uint32_t>(blobs.size());
  uint64_t cursor = align_up(sizeof h + blobs.size() * sizeof(BucketRecord), 64);
  std::vector<BucketRecord> records;
  for (const auto& b : blobs) {
    records.push_back({cursor, b.size()});
    cursor = align_up(cursor + b.size(), 64);
  }
  h.blob_size = cursor;
  if (share_first_weights && !blobs.empty() && blobs[0].size() >= sizeof(EngineHeader)) {
    EngineHeader first{};
    std::memcpy(&first, blobs[0].data(), sizeof first);
    if (first.weights.size > 0) {
      h.weights = {records[0].offset + first.weights.offset, first.weights.size};
    }
  }
  std::vector<uint8_t> out(cursor, 0);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, records.data(), records.size() * sizeof(BucketRecord));
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (!blobs[i].empty())
      std::memcpy(out.data() + records[i].offset, blobs[i].data(), blobs[i].size());
  }
  return out;
}

bool holds_symbols(const EngineBlob& blob, std::span<const int64_t> symbols) {
  if (symbols.size() != blob.symbols().size()) return false;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i] < blob.symbols()[i].min || symbols[i] > blob.symbols()[i].max) return false;
  }
  return true;
}

Status apply_patches(const EngineBlob& blob, std::span<const int64_t> values,
                     std::span<StepRecord> steps, std::span<int64_t> args,
                     std::span<int64_t> binding_sizes) {
  for (const PatchRecord& p : blob.patches()) {
    int64_t v = values[p.expr];
    if (static_cast<PatchKind>(p.kind) == PatchKind::DivisionMagic) v = division_magic(v);
    switch (static_cast<PatchTarget>(p.target)) {
      case PatchTarget::StepField: {
        auto* bytes = reinterpret_cast<uint8_t*>(&steps[p.index]);
        if (p.width == 4) {
          BATON_CHECK_OR_RETURN(v >= 0 && v <= UINT32_MAX, InvalidArgument,
                                "step {} {} would be {} at these sizes", p.index,
                                step_field_name(steps[p.index].kind, p.offset), v);
          const auto narrow = static_cast<uint32_t>(v);
          std::memcpy(bytes + p.offset, &narrow, 4);
        } else {
          std::memcpy(bytes + p.offset, &v, 8);
        }
        break;
      }
      case PatchTarget::Arg:
        args[p.index] = v;
        break;
      case PatchTarget::BindingSize:
        binding_sizes[p.index * kEngineMaxRank + p.offset] = v;
        break;
    }
  }
  return Status();
}

Status EngineBlob::check_steps(std::span<const StepRecord> steps, std::span<const int64_t> args,
                               std::span<const uint64_t> binding_bytes) const {
  Validator v(*this, binding_bytes, args);
  return v.steps(steps);
}

bool is_cudnn_step(uint32_t kind) {
  return kind == static_cast<uint32_t>(StepKind::Conv) ||
         kind == static_cast<uint32_t>(StepKind::Sdpa) ||
         kind == static_cast<uint32_t>(StepKind::Matmul);
}

std::string_view step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::Gemm:
      return "gemm";
    case StepKind::Kernel:
      return "kernel";
    case StepKind::Copy:
      return "copy";
    case StepKind::Conv:
      return "conv";
    case StepKind::Sdpa:
      return "sdpa";
    case StepKind::Matmul:
      return "matmul";
  }
  return "unknown";
}

int cudnn_operands(const StepRecord& r, BufferRef (&out)[5]) {
  int n = 0;
  if (r.kind == static_cast<uint32_t>(StepKind::Conv)) {
    const ConvStep& c = r.conv;
    out[n++] = c.x;
    out[n++] = c.w;
    if (c.has_bias) out[n++] = c.bias;
    if (c.has_residual) out[n++] = c.residual;
    out[n++] = c.y;
  } else if (r.kind == static_cast<uint32_t>(StepKind::Sdpa)) {
    const SdpaStep& a = r.sdpa;
    out[n++] = a.q;
    out[n++] = a.k;
    out[n++] = a.v;
    if (static_cast<SdpaMask>(a.mask) == SdpaMask::Bias) out[n++] = a.bias;
    out[n++] = a.o;
  } else if (r.kind == static_cast<uint32_t>(StepKind::Matmul)) {
    const GemmStep& g = r.gemm;
    out[n++] = g.a;
    out[n++] = g.b;
    if (epilogue_has_bias(static_cast<GemmEpilogue>(g.epilogue))) out[n++] = g.bias;
    out[n++] = g.d;
  }
  return n;
}

int step_buffers(const StepRecord& r, BufferRef (&out)[kMaxKernelOperands]) {
  switch (static_cast<StepKind>(r.kind)) {
    case StepKind::Gemm: {
      int n = 0;
      for (const BufferRef* ref : {&r.gemm.a, &r.gemm.b, &r.gemm.d}) out[n++] = *ref;
      if (r.gemm.has_c) out[n++] = r.gemm.c;
      if (epilogue_has_bias(static_cast<GemmEpilogue>(r.gemm.epilogue))) out[n++] = r.gemm.bias;
      return n;
    }
    case StepKind::Kernel: {
      const uint32_t n = std::min(r.kernel.num_operands, kMaxKernelOperands);
      std::copy(r.kernel.operands, r.kernel.operands + n, out);
      return static_cast<int>(n);
    }
    case StepKind::Copy:
      out[0] = r.copy.src;
      out[1] = r.copy.dst;
      return 2;
    default: {
      BufferRef cudnn[5];
      const int n = cudnn_operands(r, cudnn);
      std::copy(cudnn, cudnn + n, out);
      return n;
    }
  }
}

SizeOnlyBlock size_only_block(std::span<const StepRecord> steps) {
  SizeOnlyBlock b;
  uint64_t lo = UINT64_MAX, hi = 0;
  BufferRef refs[kMaxKernelOperands];
  for (const StepRecord& r : steps) {
    if (!is_size_only_kernel(r)) continue;
    ++b.steps;
    for (int i = 0, n = step_buffers(r, refs); i < n; ++i) {
      if (refs[i].space != static_cast<uint32_t>(Space::Scratch)) continue;
      lo = std::min(lo, refs[i].offset);
      hi = std::max(hi, refs[i].offset + refs[i].bytes);
    }
  }
  if (b.steps == 0) return b;
  auto refuse = [&](std::string why) {
    SizeOnlyBlock none;
    none.refused = std::move(why);
    return none;
  };
  if (hi <= lo) return refuse("its size-only kernels write no scratch");
  if (hi - lo > kMaxSizeOnlyBytes) {
    return refuse(fmt::format("its size-only block takes {} bytes, more than {}", hi - lo,
                              kMaxSizeOnlyBytes));
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepRecord& r = steps[s];
    for (int i = 0, n = step_buffers(r, refs); i < n; ++i) {
      if (refs[i].space == static_cast<uint32_t>(Space::Weights)) continue;
      if (refs[i].space == static_cast<uint32_t>(Space::Binding)) {
        if (is_size_only_kernel(r)) {
          return refuse(fmt::format("size-only step {} reads binding {}", s, refs[i].index));
        }
        continue;
      }
      const uint64_t start = refs[i].offset, end = refs[i].offset + refs[i].bytes;
      const bool inside = start >= lo && end <= hi, outside = end <= lo || start >= hi;
      if (!inside && !outside) {
        return refuse(
            fmt::format("step {} touches scratch [{}, {}) across the size-only block "
                        "[{}, {})",
                        s, start, end, lo, hi));
      }
    }
  }
  b.begin = lo;
  b.end = hi;
  return b;
}

bool same_cudnn_graph(const StepRecord& a, const StepRecord& b) {
  if (a.kind != b.kind || !is_cudnn_step(a.kind)) return false;
  // Both with every buffer reference cleared; the rest of the record is the operation graph.
  auto graph_of = [](StepRecord r) {
    switch (static_cast<StepKind>(r.kind)) {
      case StepKind::Conv:
        for (BufferRef* ref : {&r.conv.x, &r.conv.w, &r.conv.bias, &r.conv.residual, &r.conv.y})
          *ref = BufferRef{};
        break;
      case StepKind::Sdpa:
        for (BufferRef* ref : {&r.sdpa.q, &r.sdpa.k, &r.sdpa.v, &r.sdpa.o, &r.sdpa.bias})
          *ref = BufferRef{};
        break;
      case StepKind::Matmul:
        for (BufferRef* ref : {&r.gemm.a, &r.gemm.b, &r.gemm.c, &r.gemm.d, &r.gemm.bias})
          *ref = BufferRef{};
        break;
      default:
        break;
    }
    return r;
  };
  const StepRecord x = graph_of(a), y = graph_of(b);
  return std::memcmp(&x, &y, sizeof x) == 0;
}

std::string_view sdpa_mask_name(SdpaMask m) {
  switch (m) {
    case SdpaMask::None:
      return "none";
    case SdpaMask::Causal:
      return "causal";
    case SdpaMask::Bias:
      return "bias";
  }
  return "?";
}

std::string_view conv_activation_name(ConvActivation a) {
  switch (a) {
    case ConvActivation::None:
      return "none";
    case ConvActivation::Relu:
      return "relu";
    case ConvActivation::HardSwish:
      return "hardswish";
    case ConvActivation::HardSigmoid:
      return "hardsigmoid";
  }
  return "?";
}

bool epilogue_has_bias(GemmEpilogue e) {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::BiasRelu ||
         e == GemmEpilogue::BiasGeluTanh || e == GemmEpilogue::BiasGeluErf;
}

std::string_view epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None:
      return "none";
    case GemmEpilogue::Bias:
      return "bias";
    case GemmEpilogue::BiasRelu:
      return "bias+relu";
    case GemmEpilogue::BiasGeluTanh:
      return "bias+gelu_tanh";
    case GemmEpilogue::Relu:
      return "relu";
    case GemmEpilogue::BiasGeluErf:
      return "bias+gelu";
  }
  return "invalid";
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::TF32:
      return "tf32";
    case Precision::FP16:
      return "fp16";
    case Precision::BF16:
      return "bf16";
  }
  return "invalid";
}

bool parse_precision(std::string_view text, Precision* out) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16}) {
    if (precision_name(p) == text) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool parse_sm_arch(std::string_view text, uint32_t* out) {
  if (text.substr(0, 3) != "sm_" || text.size() < 5 || text.size() > 7) return false;
  uint32_t v = 0;
  for (char c : text.substr(3)) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v < 50) return false;
  *out = v;
  return true;
}

std::string sm_arch_name(uint32_t arch) { return fmt::format("sm_{}", arch); }

bool cubin_runs_on(uint32_t built, uint32_t device) {
  return device / 10 == built / 10 && device % 10 >= built % 10;
}

std::string_view EngineBlob::string(uint32_t offset, uint32_t size) const {
  return {strings_.data() + offset, size};
}
std::string_view EngineBlob::binding_name(size_t i) const {
  return string(bindings_[i].name_offset, bindings_[i].name_size);
}
std::string_view EngineBlob::kernel_name(size_t i) const {
  return string(kernels_[i].name_offset, kernels_[i].name_size);
}
const StepChoice* EngineBlob::choice(size_t step) const {
  if (step >= choice_of_step_.size() || choice_of_step_[step] < 0) return nullptr;
  return &choices_[static_cast<size_t>(choice_of_step_[step])];
}
std::string_view EngineBlob::choices_gpu() const {
  return {header_.choices_gpu, ::strnlen(header_.choices_gpu, sizeof header_.choices_gpu)};
}
size_t EngineBlob::num_choice_steps() const {
  size_t n = 0;
  for (const StepRecord& r : steps_) {
    n += r.kind == static_cast<uint32_t>(StepKind::Gemm) || is_cudnn_step(r.kind);
  }
  return n;
}

AlignedBlobCopy::AlignedBlobCopy(std::span<const uint8_t> bytes)
    : storage_(bytes.size() / 8 + 16), size_(bytes.size()) {
  auto* aligned =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(storage_.data()) + 63) / 64 * 64);
  if (!bytes.empty()) std::memcpy(aligned, bytes.data(), bytes.size());
  data_ = aligned;
}

size_t EngineBlob::num_inputs() const {
  size_t n = 0;
  for (const auto& b : bindings_) n += b.is_output ? 0 : 1;
  return n;
}

Result<EngineBlob> EngineBlob::parse(std::span<const uint8_t> bytes,
                                     std::span<const uint8_t> shared_weights) {
  BATON_CHECK_OR_RETURN(bytes.size() >= sizeof(EngineHeader), InvalidProgram,
                        "engine blob is {} bytes, smaller than its {}-byte header (truncated or "
                        "missing)",
                        bytes.size(), sizeof(EngineHeader));
  BATON_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(bytes.data()) % 64 == 0, InvalidProgram,
                        "engine blob is not 64-byte aligned in memory");
  EngineBlob blob;
  std::memcpy(&blob.header_, bytes.data(), sizeof(EngineHeader));
  const EngineHeader& h = blob.header_;
  BATON_CHECK_OR_RETURN(std::memcmp(h.magic, kEngineMagic, 8) == 0, InvalidProgram,
                        "engine blob does not start with 'BTNENGIN': not a Baton CUDA engine");
  BATON_CHECK_OR_RETURN(h.version == kEngineVersion || h.version == kStaticEngineVersion,
                        NotSupported,
                        "engine blob version {}; this runtime reads versions {} and {}: "
                        "recompile the model with this version of baton",
                        h.version, kStaticEngineVersion, kEngineVersion);
  BATON_CHECK_OR_RETURN(h.header_size == sizeof(EngineHeader) && bytes.size() < kMaxBlobBytes,
                        InvalidProgram, "engine blob header_size = {}, expected {}", h.header_size,
                        sizeof(EngineHeader));
  BATON_CHECK_OR_RETURN(
      h.blob_size == bytes.size(), InvalidProgram,
      "engine blob header says {} bytes but the blob has {}: truncated or corrupt", h.blob_size,
      bytes.size());
  BATON_CHECK_OR_RETURN(h.precision <= 3, InvalidProgram, "engine blob precision = {} is unknown",
                        h.precision);
  BATON_CHECK_OR_RETURN(h.device_id >= 0 && h.device_id <= 255, InvalidProgram,
                        "engine blob device_id = {} is out of range", h.device_id);
  const std::pair<const Section*, const char*> sections[] = {
      {&h.bindings, "bindings"}, {&h.steps, "steps"},     {&h.strings, "strings"},
      {&h.kernels, "kernels"},   {&h.weights, "weights"}, {&h.cubin, "cubin"},
      {&h.options, "options"},   {&h.args, "args"}};
  for (const auto& [s, name] : sections) {
    BATON_CHECK_OR_RETURN(
        inside(*s, bytes.size()) && s->offset % 64 == 0 && s->offset >= sizeof(EngineHeader),
        InvalidProgram,
        "engine blob section '{}' [{}, +{}) is misaligned or outside the "
        "{}-byte blob",
        name, s->offset, s->size, bytes.size());
  }
  // A dynamic engine's sections are empty ({0, 0}) in a static one.
  for (const auto& [sec, name] : {std::pair{&h.symbols, "symbols"}, std::pair{&h.exprs, "exprs"},
                                  std::pair{&h.patches, "patches"}}) {
    BATON_CHECK_OR_RETURN(
        (sec->size == 0 && sec->offset == 0) ||
            (inside(*sec, bytes.size()) && sec->offset % 64 == 0 &&
             sec->offset >= sizeof(EngineHeader)),
        InvalidProgram,
        "engine blob section '{}' [{}, +{}) is misaligned or outside the {}-byte blob", name,
        sec->offset, sec->size, bytes.size());
  }
  // The choices section is optional: zero when the engine was built without its GPU.
  BATON_CHECK_OR_RETURN(
      h.choices.size == 0 ||
          (inside(h.choices, bytes.size()) && h.choices.offset % 64 == 0 &&
           h.choices.offset >= sizeof(EngineHeader) && h.choices.size % sizeof(StepChoice) == 0),
      InvalidProgram,
      "engine blob section 'choices' [{}, +{}) is misaligned, outside the {}-byte blob or not a "
      "whole number of {}-byte records",
      h.choices.offset, h.choices.size, bytes.size(), sizeof(StepChoice));
  BATON_CHECK_OR_RETURN(
      h.bindings.size == uint64_t{h.num_bindings} * sizeof(BindingRecord) &&
          h.steps.size == uint64_t{h.num_steps} * sizeof(StepRecord) &&
          h.kernels.size == uint64_t{h.num_kernels} * sizeof(KernelRecord) &&
          h.args.size % sizeof(int64_t) == 0 && h.symbols.size % sizeof(SymbolRecord) == 0 &&
          h.exprs.size % sizeof(ExprRecord) == 0 && h.patches.size % sizeof(PatchRecord) == 0,
      InvalidProgram,
      "engine blob section sizes disagree with the header's counts ({} bindings, {} steps, {} "
      "kernels) or the args, symbols, exprs or patches sections are not whole records",
      h.num_bindings, h.num_steps, h.num_kernels);
  const bool dynamic = h.symbols.size > 0;
  BATON_CHECK_OR_RETURN(
      dynamic == (h.version == kEngineVersion) &&
          (dynamic || (h.exprs.size == 0 && h.patches.size == 0)),
      InvalidProgram,
      "engine blob version {} with {} bytes of symbols and {} of patches: a dynamic engine is "
      "version 4 and has symbols, a static one is version 3 and has neither",
      h.version, h.symbols.size, h.patches.size);
  BATON_CHECK_OR_RETURN(h.scratch_bytes < kMaxBlobBytes && h.workspace_bytes < (uint64_t{1} << 34),
                        InvalidProgram,
                        "engine blob scratch {} / workspace {} bytes is implausible",
                        h.scratch_bytes, h.workspace_bytes);
  BATON_CHECK_OR_RETURN(h.cubin.size > 0 || h.num_kernels == 0, InvalidProgram,
                        "engine blob has kernels but no cubin");
  const uint8_t* base = bytes.data();
  // The options are shown by inspect as they are: lines of printable ASCII, each KEY=VALUE.
  BATON_CHECK_OR_RETURN(h.options.size <= kMaxEngineOptionsBytes, InvalidProgram,
                        "engine blob options section is {} bytes, more than {}", h.options.size,
                        kMaxEngineOptionsBytes);
  blob.options_ = {reinterpret_cast<const char*>(base + h.options.offset), h.options.size};
  for (size_t start = 0; start < blob.options_.size();) {
    const size_t end = std::min(blob.options_.find('\n', start), blob.options_.size());
    const std::string_view line = blob.options_.substr(start, end - start);
    const size_t eq = line.find('=');
    bool printable = true;
    for (char c : line) printable = printable && c >= 0x20 && c < 0x7f;
    BATON_CHECK_OR_RETURN(printable && eq != std::string_view::npos && eq > 0, InvalidProgram,
                          "engine blob options: line at byte {} is not KEY=VALUE in printable "
                          "ASCII",
                          start);
    blob.option_pairs_.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    start = end + 1;
  }
  blob.bindings_ = {reinterpret_cast<const BindingRecord*>(base + h.bindings.offset),
                    h.num_bindings};
  blob.steps_ = {reinterpret_cast<const StepRecord*>(base + h.steps.offset), h.num_steps};
  blob.kernels_ = {reinterpret_cast<const KernelRecord*>(base + h.kernels.offset), h.num_kernels};
  blob.strings_ = {reinterpret_cast<const char*>(base + h.strings.offset), h.strings.size};
  blob.weights_ = bytes.subspan(h.weights.offset, h.weights.size);
  if (blob.weights_.empty()) blob.weights_ = shared_weights;
  blob.cubin_ = bytes.subspan(h.cubin.offset, h.cubin.size);
  blob.args_ = {reinterpret_cast<const int64_t*>(base + h.args.offset),
                h.args.size / sizeof(int64_t)};
  blob.symbols_ = {reinterpret_cast<const SymbolRecord*>(base + h.symbols.offset),
                   h.symbols.size / sizeof(SymbolRecord)};
  blob.exprs_ = {reinterpret_cast<const ExprRecord*>(base + h.exprs.offset),
                 h.exprs.size / sizeof(ExprRecord)};
  blob.patches_ = {reinterpret_cast<const PatchRecord*>(base + h.patches.offset),
                   h.patches.size / sizeof(PatchRecord)};
  if (h.choices.size > 0) {
    blob.choices_ = {reinterpret_cast<const StepChoice*>(base + h.choices.offset),
                     h.choices.size / sizeof(StepChoice)};
  }
  Validator v(blob);
  BATON_TRY(v.bindings());
  BATON_TRY(v.kernels());
  BATON_TRY(v.steps(blob.steps()));
  BATON_TRY(v.dynamic());
  BATON_TRY(v.choices(&blob.choice_of_step_));
  return blob;
}

Result<std::vector<uint8_t>> write_engine_blob(const EngineDescription& e) {
  std::string strings;
  std::vector<BindingRecord> bindings;
  for (const auto& b : e.bindings) {
    BATON_CHECK_OR_RETURN(b.sizes.size() <= kEngineMaxRank, NotSupported,
                          "binding '{}' has rank {}; engines support up to {}", b.name,
                          b.sizes.size(), kEngineMaxRank);
    BindingRecord r{};
    r.name_offset = static_cast<uint32_t>(strings.size());
    r.name_size = static_cast<uint32_t>(b.name.size());
    strings += b.name;
    r.dtype = static_cast<uint8_t>(b.dtype);
    r.is_output = b.is_output ? 1 : 0;
    r.rank = static_cast<uint8_t>(b.sizes.size());
    for (size_t d = 0; d < b.sizes.size(); ++d) r.sizes[d] = b.sizes[d];
    bindings.push_back(r);
  }
  BATON_CHECK_OR_RETURN(e.kernel_params.size() == e.kernel_names.size(), InvalidArgument,
                        "the engine names {} kernels but gives the parameters of {}",
                        e.kernel_names.size(), e.kernel_params.size());
  std::vector<KernelRecord> kernels;
  for (size_t i = 0; i < e.kernel_names.size(); ++i) {
    const std::string& k = e.kernel_names[i];
    kernels.push_back({static_cast<uint32_t>(strings.size()), static_cast<uint32_t>(k.size()),
                       e.kernel_params[i].first, e.kernel_params[i].second});
    strings += k;
  }
  std::vector<SymbolRecord> symbols;
  for (const auto& sy : e.symbols) {
    symbols.push_back({static_cast<uint32_t>(strings.size()), static_cast<uint32_t>(sy.name.size()),
                       sy.min, sy.max, sy.opt});
    strings += sy.name;
  }
  EngineHeader h{};
  std::memcpy(h.magic, kEngineMagic, 8);
  h.version = symbols.empty() ? kStaticEngineVersion : kEngineVersion;
  h.header_size = sizeof(EngineHeader);
  h.device_id = e.device_id;
  h.sm_arch = e.sm_arch;
  h.cuda_version = e.cuda_version;
  h.cublaslt_version = e.cublaslt_version;
  h.cudnn_version = e.cudnn_version;
  h.nvrtc_version = e.nvrtc_version;
  h.precision = static_cast<uint32_t>(e.precision);
  h.num_bindings = static_cast<uint32_t>(bindings.size());
  h.num_steps = static_cast<uint32_t>(e.steps.size());
  h.num_kernels = static_cast<uint32_t>(kernels.size());
  h.scratch_bytes = e.scratch_bytes;
  h.workspace_bytes = e.workspace_bytes;
  uint64_t cursor = sizeof(EngineHeader);
  auto place = [&](Section& s, uint64_t size) {
    cursor = align_up(cursor, 64);
    s.offset = cursor;
    s.size = size;
    cursor += size;
  };
  place(h.bindings, bindings.size() * sizeof(BindingRecord));
  place(h.steps, e.steps.size() * sizeof(StepRecord));
  place(h.strings, strings.size());
  place(h.kernels, kernels.size() * sizeof(KernelRecord));
  place(h.weights, e.weights.size());
  place(h.cubin, e.cubin.size());
  std::string options;
  for (const std::string& o : e.options) options += o + "\n";
  BATON_CHECK_OR_RETURN(options.size() <= kMaxEngineOptionsBytes, InvalidArgument,
                        "the engine's build options take {} bytes, more than {}", options.size(),
                        kMaxEngineOptionsBytes);
  place(h.options, options.size());
  place(h.args, e.args.size() * sizeof(int64_t));
  if (!symbols.empty()) {
    place(h.symbols, symbols.size() * sizeof(SymbolRecord));
    place(h.exprs, e.exprs.size() * sizeof(ExprRecord));
    place(h.patches, e.patches.size() * sizeof(PatchRecord));
  }
  h.blob_size = align_up(cursor, 64);
  std::vector<uint8_t> out(h.blob_size, 0);
  std::memcpy(out.data(), &h, sizeof h);
  auto put = [&](const Section& s, const void* data) {
    if (s.size) std::memcpy(out.data() + s.offset, data, s.size);
  };
  put(h.bindings, bindings.data());
  put(h.steps, e.steps.data());
  put(h.strings, strings.data());
  put(h.kernels, kernels.data());
  put(h.weights, e.weights.data());
  put(h.cubin, e.cubin.data());
  put(h.options, options.data());
  put(h.args, e.args.data());
  put(h.symbols, symbols.data());
  put(h.exprs, e.exprs.data());
  put(h.patches, e.patches.data());
  return out;
}

Result<std::vector<uint8_t>> record_choices(std::span<const uint8_t> blob,
                                            const EngineChoices& choices,
                                            std::span<const uint8_t> shared_weights) {
  EngineHeader h{};
  BATON_CHECK_OR_RETURN(blob.size() >= sizeof h, InvalidProgram,
                        "engine blob is {} bytes, smaller than its header", blob.size());
  std::memcpy(&h, blob.data(), sizeof h);
  BATON_CHECK_OR_RETURN(std::memcmp(h.magic, kEngineMagic, 8) == 0 && h.blob_size == blob.size(),
                        InvalidProgram, "not a whole Baton CUDA engine blob");
  // The choices section is always the last one: drop the old one, append the new one.
  const uint64_t end = h.choices.size > 0 ? h.choices.offset : blob.size();
  BATON_CHECK_OR_RETURN(end <= blob.size(), InvalidProgram,
                        "engine blob section 'choices' starts past the blob's end");
  BATON_CHECK_OR_RETURN(choices.gpu.size() < sizeof h.choices_gpu, InvalidArgument,
                        "GPU name '{}' is longer than {} bytes", choices.gpu,
                        sizeof h.choices_gpu - 1);
  const uint64_t offset = align_up(end, 64);
  const uint64_t size = choices.steps.size() * sizeof(StepChoice);
  h.choices = {size > 0 ? offset : 0, size};
  h.choices_cublaslt_version = choices.cublaslt_version;
  h.choices_cudnn_version = choices.cudnn_version;
  std::memset(h.choices_gpu, 0, sizeof h.choices_gpu);
  std::memcpy(h.choices_gpu, choices.gpu.data(), choices.gpu.size());
  h.blob_size = align_up(offset + size, 64);
  std::vector<uint8_t> out(h.blob_size, 0);
  std::memcpy(out.data(), blob.data(), end);
  std::memcpy(out.data(), &h, sizeof h);
  if (size > 0) std::memcpy(out.data() + offset, choices.steps.data(), size);
  // Check the result as a loader would.
  BATON_TRY(EngineBlob::parse(AlignedBlobCopy(out).span(), shared_weights).status());
  return out;
}

}  // namespace baton::cuda
