// ONNX ConvTranspose (ops/conv.cpp): per batch item and group, col [M/group * K, in] = W_g^T x X_g
// (W_g is [C/group, M/group * K] as stored), then col2im adds each column into the output
// positions its window reaches, over Y preloaded with the bias. A 1x1 kernel with stride 1 and no
// padding writes W_g^T x X_g straight into Y. The column buffer is tiled over input positions like
// Conv's (conv_common.h). A float32 W that is a constant of the program is transposed and packed
// at create for Baton's packed kernel (packed_gemm.h's packed_rows_gemm, as Conv's W); otherwise
// OpenBLAS. float16 and bfloat16 compute in float and round once per output element; float64
// runs dgemm.
#include <algorithm>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/conv_common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_gemm.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

template <typename S>
class ConvTransposeKernel final : public ConvBatchKernel<S, ConvTransposeKernel<S>> {
  using Base = ConvBatchKernel<S, ConvTransposeKernel<S>>;
  using W = typename Base::W;
  using Base::s_;

 public:
  ConvTransposeKernel(const runtime::KernelCall& call, const ConvShape& shape, bool pointwise)
      : Base(call, shape),
        window_(shape.window(true)),
        pointwise_(pointwise),
        rows_(shape.m_group * shape.kernel_count),
        tile_(pointwise ? shape.in_count : column_tile(rows_, shape.in_count)) {}

  // The scratch: float copies (Base) and one tile of columns.
  Status reserve(const runtime::KernelCall& call) {
    BATON_TRY(this->reserve_conversions(call));
    if (s_.empty || pointwise_) return Status::ok_status();
    return call.reserve_scratch<W>(col_, static_cast<uint64_t>(rows_ * tile_), "col2im columns");
  }

  // A float32 W that is a constant of the program: each group's W_g^T packed by blocks of rows
  // at create, so that the GEMMs run Baton's packed kernel, which beats OpenBLAS at every depth
  // measured for Conv (op_conv.cpp); the UNet's stride-2 ConvTranspose layers had run at 1.6x
  // onnxruntime's time through OpenBLAS (bench/RESULTS.md).
  Status pack(const runtime::KernelCall& call) {
    if constexpr (std::is_same_v<S, float>) {
      if (s_.empty || s_.c_group == 0 || rows_ == 0 || !call.input_is_constant(1) ||
          !packed_gemm_available()) {
        return Status::ok_status();
      }
      const float* w = call.input(1).data_as<const float>();
      const int64_t per_group = packed_rows_size(rows_, s_.c_group);
      BATON_TRY(size_buffer(packed_, static_cast<uint64_t>(per_group * s_.group), call,
                            "packed copy of the transposed convolution's weights"));
      std::vector<float> transposed;
      BATON_TRY(size_buffer(transposed, static_cast<uint64_t>(rows_ * s_.c_group), call,
                            "transposed copy of the convolution's weights"));
      for (int64_t g = 0; g < s_.group; ++g) {
        const float* wg = w + g * s_.c_group * rows_;  // [c_group, rows_]
        for (int64_t r = 0; r < rows_; ++r)
          for (int64_t p = 0; p < s_.c_group; ++p)
            transposed[r * s_.c_group + p] = wg[p * rows_ + r];
        pack_rows(transposed.data(), rows_, s_.c_group, s_.c_group, packed_.data() + g * per_group);
      }
    }
    return Status::ok_status();
  }

  uint64_t held_bytes() const override { return packed_.size() * sizeof(float); }

  void compute_item(const W* x, const W* w, const S* bias, W* y) {
    // A pointwise product through the packed kernel writes Y whole, the bias included.
    if (!(pointwise_ && !packed_.empty() && s_.c_group > 0)) fill_bias(bias, s_.m, s_.out_count, y);
    if (s_.c_group == 0) return;
    for (int64_t g = 0; g < s_.group; ++g) group_gemm(x, w, bias, g, y);
  }

 private:
  void group_gemm(const W* xn, const W* w, const S* bias, int64_t g, W* y) {
    const W* xg = xn + g * s_.c_group * s_.in_count;
    const W* wg = w + g * s_.c_group * rows_;
    W* yg = y + g * s_.m_group * s_.out_count;
    if constexpr (std::is_same_v<S, float>) {
      if (!packed_.empty()) {
        const float* packed = packed_.data() + g * packed_rows_size(rows_, s_.c_group);
        if (pointwise_) {
          // Y = bias + W_g^T x X_g, straight into Y.
          packed_rows_gemm(this->pool_, rows_, s_.in_count, s_.c_group, packed, xg, s_.in_count,
                           bias != nullptr ? bias + g * s_.m_group : nullptr, yg, s_.out_count,
                           RowsEpilogue{});
          return;
        }
        for (int64_t p0 = 0; p0 < s_.in_count; p0 += tile_) {
          const int64_t p1 = std::min(s_.in_count, p0 + tile_);
          packed_rows_gemm(this->pool_, rows_, p1 - p0, s_.c_group, packed, xg + p0, s_.in_count,
                           nullptr, col_.data<float>(), p1 - p0, RowsEpilogue{});
          col2im_add(window_, col_.data<float>(), s_.m_group, p0, p1, yg);
        }
        return;
      }
    }
    if (pointwise_) {
      parallel_gemm<W>(this->pool_, true, false, rows_, s_.in_count, s_.c_group, W(1), wg, rows_,
                       xg, s_.in_count, W(1), yg, s_.out_count, nullptr);
      return;
    }
    for (int64_t p0 = 0; p0 < s_.in_count; p0 += tile_) {
      const int64_t p1 = std::min(s_.in_count, p0 + tile_);
      parallel_gemm<W>(this->pool_, true, false, rows_, p1 - p0, s_.c_group, W(1), wg, rows_,
                       xg + p0, s_.in_count, W(0), col_.data<W>(), p1 - p0, nullptr);
      col2im_add(window_, col_.data<W>(), s_.m_group, p0, p1, yg);
    }
  }

  ConvWindow window_;
  bool pointwise_;
  int64_t rows_;  // M/group * K: the column buffer's rows
  int64_t tile_;  // input positions per GEMM
  runtime::ScratchRef col_;
  std::vector<float> packed_;  // W_g^T packed by row blocks per group (empty: OpenBLAS)
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const ConvShape shape = conv_shape(call);
  // Pointwise: every output position is the one input position under it.
  bool pointwise = true;
  for (int d = 0; d < shape.spatial; ++d) {
    pointwise = pointwise && shape.kernel[d] == 1 && shape.strides[d] == 1 && shape.pads[d] == 0 &&
                shape.in[d] == shape.out[d];
  }
  if (!shape.empty) {
    const int64_t rows = shape.m_group * shape.kernel_count;
    BATON_TRY(check_conv_blas_range(call, {rows, shape.c_group, shape.in_count, shape.out_count,
                                           pointwise ? 0 : column_tile(rows, shape.in_count)}));
  }
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(call.input(0).dtype, [&]<typename S>() {
    auto conv = std::make_unique<ConvTransposeKernel<S>>(call, shape, pointwise);
    reserved = conv->pack(call);
    if (reserved.ok()) kernel = with_scratch(std::move(conv), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_conv_transpose(runtime::KernelRegistry& registry) {
  registry.add({"ConvTranspose", "", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
