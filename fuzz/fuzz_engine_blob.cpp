// The CUDA engine blob as an attacker writes it: EngineBlob::parse (plain C++, no GPU), every
// accessor of a blob that parses, and the description `baton inspect` prints of it.
//
// The blob is parsed where the delegate finds it (64-byte aligned inside a program segment) and
// also at the fuzzer's own address and one byte past it: misaligned memory must be refused with
// an error, never read through misaligned record pointers.
//
// Parsing reads none of the memory a blob describes (that happens on the GPU), so a parser that
// accepts an operand reaching past its buffer would crash nothing here. An oracle therefore
// recomputes, in 128-bit arithmetic, the bytes every step of an accepted blob touches and aborts
// when they are not inside the operand's range and the range inside its buffer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/engine_describe.h"
#include "backends/cuda/engine_format.h"
#include "baton/core/log.h"
#include "baton/core/tensor.h"

namespace {

[[noreturn]] void fail(const char* what, const baton::Status& status) {
  std::fprintf(stderr, "baton fuzz: %s: %s\n", what, status.message().c_str());
  std::abort();
}

void check_not_internal(const char* what, const baton::Status& status) {
  if (status.code() == baton::Error::Internal) fail(what, status);
}

using u128 = unsigned __int128;

std::string to_string(u128 v) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return digits;
}

[[noreturn]] void out_of_bounds(size_t step, const char* operand, u128 need, u128 have) {
  std::fprintf(stderr,
               "baton fuzz: EngineBlob::parse accepted steps[%zu] %s touching %s bytes where %s "
               "are in bounds\n",
               step, operand, to_string(need).c_str(), to_string(have).c_str());
  std::abort();
}

// The bytes of the buffer `ref` points into.
u128 buffer_bytes(const baton::cuda::EngineBlob& blob, const baton::cuda::BufferRef& ref,
                  size_t step, const char* operand) {
  using baton::cuda::Space;
  switch (static_cast<Space>(ref.space)) {
    case Space::Binding: {
      if (ref.index >= blob.bindings().size()) out_of_bounds(step, operand, ref.index, 0);
      const auto& b = blob.bindings()[ref.index];
      u128 bytes = baton::dtype_size(static_cast<baton::DType>(b.dtype));
      for (uint32_t d = 0; d < b.rank; ++d) bytes *= static_cast<uint64_t>(b.sizes[d]);
      return bytes;
    }
    case Space::Scratch:
      return blob.header().scratch_bytes;
    case Space::Weights:
      return blob.weights().size();
  }
  out_of_bounds(step, operand, ref.space, 0);
}

// `need` bytes from the start of `ref` must lie inside its range, and the range inside its buffer.
void check_range(const baton::cuda::EngineBlob& blob, const baton::cuda::BufferRef& ref, u128 need,
                 size_t step, const char* operand) {
  if (need > ref.bytes) out_of_bounds(step, operand, need, ref.bytes);
  const u128 end = static_cast<u128>(ref.offset) + ref.bytes;
  const u128 size = buffer_bytes(blob, ref, step, operand);
  if (end > size) out_of_bounds(step, operand, end, size);
}

// `batch` column-major rows x cols matrices with leading dimension ld, `stride` elements apart,
// as cuBLASLt reads or writes them.
void check_matrix(const baton::cuda::EngineBlob& blob, const baton::cuda::BufferRef& ref,
                  uint8_t dtype, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                  uint32_t batch, size_t step, const char* operand) {
  if (rows <= 0 || cols <= 0 || batch == 0 || ld < rows || stride < 0) {
    out_of_bounds(step, operand, 0, 0);  // no such matrix: the parser must refuse it
  }
  const u128 last = static_cast<u128>(static_cast<uint64_t>(stride)) * (batch - 1) +
                    static_cast<u128>(static_cast<uint64_t>(ld)) * static_cast<uint64_t>(cols - 1) +
                    static_cast<uint64_t>(rows);
  check_range(blob, ref, last * baton::dtype_size(static_cast<baton::DType>(dtype)), step, operand);
}

void check_extents(const baton::cuda::EngineBlob& blob) {
  using baton::cuda::StepKind;
  for (size_t i = 0; i < blob.steps().size(); ++i) {
    const auto& s = blob.steps()[i];
    switch (static_cast<StepKind>(s.kind)) {
      // A cuDNN matmul step is a GemmStep that the parser checks as a GEMM's (one batch, no C).
      case StepKind::Gemm:
      case StepKind::Matmul: {
        const auto& g = s.gemm;
        check_matrix(blob, g.a, g.a_dtype, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda,
                     g.stride_a, g.batch, i, "A");
        check_matrix(blob, g.b, g.b_dtype, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb,
                     g.stride_b, g.batch, i, "B");
        check_matrix(blob, g.d, g.d_dtype, g.m, g.n, g.ldd, g.stride_d, g.batch, i, "D");
        if (g.has_c) {
          check_matrix(blob, g.c, g.c_dtype, g.m, g.n, g.ldc, g.stride_c, g.batch, i, "C");
        }
        if (baton::cuda::epilogue_has_bias(static_cast<baton::cuda::GemmEpilogue>(g.epilogue))) {
          check_range(blob, g.bias,
                      static_cast<u128>(static_cast<uint64_t>(g.m)) *
                          baton::dtype_size(static_cast<baton::DType>(g.bias_dtype)),
                      i, "bias");
        }
        break;
      }
      case StepKind::Kernel: {
        for (uint32_t o = 0; o < s.kernel.num_operands; ++o) {
          check_range(blob, s.kernel.operands[o], 0, i, "kernel operand");
        }
        // The launch reads every argument from the blob: ASan sees a range the parser let past
        // the args section.
        static volatile int64_t sink = 0;
        for (const int64_t v : blob.kernel_args(s.kernel)) sink = v;
        break;
      }
      case StepKind::Copy:
        check_range(blob, s.copy.src, s.copy.dst.bytes, i, "copy source");
        check_range(blob, s.copy.dst, s.copy.src.bytes, i, "copy destination");
        break;
      case StepKind::Conv:
      case StepKind::Sdpa:
        break;  // their extents are the parser's own checks (engine_format_test), not re-derived
    }
  }
}

void exercise(const baton::cuda::EngineBlob& blob) {
  (void)blob.header();
  (void)blob.precision();
  (void)baton::cuda::precision_name(blob.precision());
  (void)baton::cuda::sm_arch_name(blob.header().sm_arch);
  for (size_t i = 0; i < blob.bindings().size(); ++i) (void)blob.binding_name(i);
  for (size_t i = 0; i < blob.kernels().size(); ++i) (void)blob.kernel_name(i);
  for (const auto& step : blob.steps()) (void)step.kind;
  (void)blob.num_inputs();
  (void)blob.weights();
  (void)blob.cubin();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::set_log_level(baton::LogLevel::Off);
  return 0;
}

// A dynamic engine patched as a call patches it (ExecutionContext::resize), with every symbol at
// its minimum and at its maximum. At the maxima the patches give what the blob holds (the loader
// checked), so the patched steps must pass the loader's checks there; at the minima they may be
// refused, never crash.
void exercise_dynamic(const baton::cuda::EngineBlob& blob) {
  using namespace baton::cuda;
  if (!blob.dynamic()) return;
  for (const bool at_max : {true, false}) {
    std::vector<int64_t> symbols;
    for (const SymbolRecord& r : blob.symbols()) symbols.push_back(at_max ? r.max : r.min);
    std::vector<int64_t> values(blob.exprs().size());
    const baton::Status evaluated = evaluate_exprs(blob.exprs(), symbols, values);
    check_not_internal("evaluate_exprs", evaluated);
    if (!evaluated.ok()) {
      if (at_max) fail("a dynamic engine the loader accepted fails at its maxima", evaluated);
      continue;
    }
    std::vector<StepRecord> steps(blob.steps().begin(), blob.steps().end());
    std::vector<int64_t> args(blob.args().begin(), blob.args().end());
    std::vector<int64_t> sizes(blob.bindings().size() * kEngineMaxRank, 0);
    for (size_t b = 0; b < blob.bindings().size(); ++b) {
      const BindingRecord& r = blob.bindings()[b];
      std::copy(r.sizes, r.sizes + r.rank, sizes.begin() + b * kEngineMaxRank);
    }
    const baton::Status patched = apply_patches(blob, values, steps, args, sizes);
    check_not_internal("apply_patches", patched);
    bool fits = patched.ok();
    std::vector<uint64_t> binding_bytes;
    for (size_t b = 0; b < blob.bindings().size(); ++b) {
      const auto n = baton::checked_nbytes(
          static_cast<baton::DType>(blob.bindings()[b].dtype),
          std::span<const int64_t>(sizes).subspan(b * kEngineMaxRank, blob.bindings()[b].rank));
      fits = fits && n.has_value();
      binding_bytes.push_back(n.value_or(0));
    }
    if (!fits) {
      if (at_max) fail("a dynamic engine the loader accepted overflows at its maxima", patched);
      continue;
    }
    const baton::Status checked = blob.check_steps(steps, args, binding_bytes);
    check_not_internal("EngineBlob::check_steps", checked);
    if (at_max && !checked.ok()) {
      fail("a dynamic engine the loader accepted is refused patched at its maxima", checked);
    }
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::cuda::EngineBlob;
  // 64-byte aligned, as inside a program's segment area.
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  const size_t rounded = (size + 1 + 63) / 64 * 64;
  std::unique_ptr<uint8_t, Free> aligned(static_cast<uint8_t*>(std::aligned_alloc(64, rounded)));
  if (size != 0) std::memcpy(aligned.get(), data, size);
  const std::span<const uint8_t> bytes(aligned.get(), size);

  // A bucketed engine is several blobs; a plain one is its own only bucket.
  auto buckets = baton::cuda::engine_buckets(bytes);
  check_not_internal("engine_buckets", buckets.status());
  bool all_parse = buckets.ok();
  if (buckets.ok()) {
    for (const auto& bucket : *buckets) {
      auto blob = EngineBlob::parse(bucket, baton::cuda::shared_bucket_weights(bytes));
      check_not_internal("EngineBlob::parse", blob.status());
      if (!blob.ok()) {
        all_parse = false;
        continue;
      }
      exercise(*blob);
      check_extents(*blob);
      exercise_dynamic(*blob);
    }
  }

  auto described = baton::cuda::describe_engine_json(bytes);
  check_not_internal("describe_engine_json", described.status());
  if (described.ok() != all_parse)
    fail("describe_engine_json and parse disagree", described.status());

  // One byte past a 64-byte boundary: never 64-byte aligned, so it must be refused.
  std::memmove(aligned.get() + 1, aligned.get(), size);
  auto odd = EngineBlob::parse({aligned.get() + 1, size});
  if (odd.ok()) fail("EngineBlob::parse accepted misaligned bytes", odd.status());
  return 0;
}
