// Tensor views (non-owning) and host tensors (owning, shared storage).
//
// Baton tensors are dense and contiguous in row-major order. A TensorView is a pointer plus
// dtype, sizes and device; it owns nothing, and whoever made it keeps the data and the sizes alive.
// A Tensor owns (shares) its storage and its shape, and hands out views.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton {

inline constexpr int kMaxRank = 16;

// Product of sizes; nullopt when a size is negative or the product of the nonzero sizes overflows
// int64. A shape such as [0, 2^40, 2^40] holds no elements but is refused all the same: code that
// walks a shape multiplies sub-ranges of it (outer and inner sizes, strides), and this rule is
// what keeps every such partial product inside int64.
std::optional<int64_t> checked_numel(std::span<const int64_t> sizes);
// Element count times element size; nullopt where checked_numel is, or when the byte size (or the
// byte size the nonzero sizes would make) overflows uint64.
std::optional<uint64_t> checked_nbytes(DType dtype, std::span<const int64_t> sizes);
// `value` rounded up to a multiple of `alignment` (> 0), for sizes known to be far from 2^64
// (verified program sizes, planned offsets).
constexpr uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}
// The same for sizes a caller chose: nullopt where rounding up overflows.
std::optional<uint64_t> checked_align_up(uint64_t value, uint64_t alignment);
// "[8, 4096]"
std::string shape_to_string(std::span<const int64_t> sizes);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::Float32;
  std::span<const int64_t> sizes;
  Device device = Device::cpu();

  int rank() const { return static_cast<int>(sizes.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialized host memory, 64-byte aligned.
  static Result<Tensor> empty(DType dtype, std::vector<int64_t> sizes);
  // Adopts storage that someone else allocated (device memory, a pinned buffer, a mapped file).
  // The deleter in `storage` runs when the last Tensor sharing it goes away.
  static Tensor wrap(std::shared_ptr<void> storage, DType dtype, std::vector<int64_t> sizes,
                     Device device);

  bool defined() const { return storage_ != nullptr; }
  void* data() const { return storage_.get(); }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(storage_.get());
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  Device device() const { return device_; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  TensorView view() const { return TensorView{storage_.get(), dtype_, sizes_, device_}; }

 private:
  std::shared_ptr<void> storage_;
  DType dtype_ = DType::Float32;
  std::vector<int64_t> sizes_;
  Device device_ = Device::cpu();
};

}  // namespace baton
