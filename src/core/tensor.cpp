#include "baton/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>

#include "baton/core/check.h"

namespace baton {

namespace {

// The product of the nonzero sizes (1 when there are none), and whether a size is zero; nullopt
// when a size is negative or that product overflows int64.
struct NonzeroProduct {
  int64_t product = 1;
  bool has_zero = false;
};

std::optional<NonzeroProduct> nonzero_product(std::span<const int64_t> sizes) {
  NonzeroProduct p;
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    if (s == 0) {
      p.has_zero = true;
      continue;
    }
    if (__builtin_mul_overflow(p.product, s, &p.product)) return std::nullopt;
  }
  return p;
}

}  // namespace

std::optional<int64_t> checked_numel(std::span<const int64_t> sizes) {
  const auto p = nonzero_product(sizes);
  if (!p) return std::nullopt;
  return p->has_zero ? 0 : p->product;
}

std::optional<uint64_t> checked_nbytes(DType dtype, std::span<const int64_t> sizes) {
  const auto p = nonzero_product(sizes);
  if (!p) return std::nullopt;
  // The bytes of the nonzero sizes must fit as well: strides in bytes are taken of sub-ranges.
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(p->product), dtype_size(dtype), &bytes)) {
    return std::nullopt;
  }
  return p->has_zero ? 0 : bytes;
}

std::string shape_to_string(std::span<const int64_t> sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

std::optional<uint64_t> checked_align_up(uint64_t value, uint64_t alignment) {
  const uint64_t rest = value % alignment;
  if (rest == 0) return value;
  if (value > std::numeric_limits<uint64_t>::max() - (alignment - rest)) return std::nullopt;
  return value + (alignment - rest);
}

Result<Tensor> Tensor::empty(DType dtype, std::vector<int64_t> sizes) {
  // Round up so aligned_alloc's size requirement holds; at least one block so data() is non-null.
  const auto bytes = checked_nbytes(dtype, sizes);
  const auto aligned = bytes ? checked_align_up(std::max<uint64_t>(*bytes, 1), 64) : std::nullopt;
  BATON_CHECK_OR_RETURN(aligned.has_value(), InvalidArgument,
                        "cannot allocate a {} tensor of shape {}: negative size or overflow",
                        dtype_name(dtype), shape_to_string(sizes));
  const uint64_t rounded = *aligned;
  void* p = std::aligned_alloc(64, rounded);
  BATON_CHECK_OR_RETURN(p != nullptr, OutOfMemory,
                        "out of host memory allocating {} bytes for a {} tensor of shape {}",
                        rounded, dtype_name(dtype), shape_to_string(sizes));
  Tensor t;
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.device_ = Device::cpu();
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<void> storage, DType dtype, std::vector<int64_t> sizes,
                    Device device) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.device_ = device;
  return t;
}

}  // namespace baton
