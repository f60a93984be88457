// A minimal deployment: load a Baton program and run it from C++. Links only Baton::runtime
// (no ONNX, no protobuf, no Python), and Baton::cuda for programs with GPU partitions.
//
//   run_model model.baton [input.npy ...]
//
// With no inputs it feeds each input with a ramp of values and prints the outputs' first values.
#include <cstdio>
#include <vector>

#include "baton/baton.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#ifdef RUN_MODEL_WITH_CUDA
#include "baton/cuda/backend.h"
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.baton [input.npy ...]\n", argv[0]);
    return 2;
  }
  baton::register_builtins();
#ifdef RUN_MODEL_WITH_CUDA
  baton::cuda::register_backend();
#endif
  auto module = baton::extension::Module::load(argv[1]);
  if (!module.ok()) {
    std::fprintf(stderr, "error: %s\n", module.status().to_string().c_str());
    return 1;
  }
  baton::runtime::Method& method = module->method();
  std::vector<baton::Tensor> inputs;
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    const baton::runtime::TensorInfo info = method.input_info(i);
    if (argc > static_cast<int>(i) + 2) {
      auto t = baton::extension::read_npy(argv[i + 2]);
      if (!t.ok()) {
        std::fprintf(stderr, "error: %s\n", t.status().to_string().c_str());
        return 1;
      }
      inputs.push_back(std::move(t).value());
      continue;
    }
    auto t = baton::Tensor::empty(info.dtype, {info.sizes.begin(), info.sizes.end()});
    if (!t.ok() || info.dtype != baton::DType::Float32) {
      std::fprintf(stderr, "error: input %zu needs a .npy file\n", i);
      return 1;
    }
    for (int64_t k = 0; k < t->numel(); ++k)
      t->data_as<float>()[k] = 0.01f * static_cast<float>(k % 100);
    inputs.push_back(std::move(t).value());
  }
  auto outputs = module->run(inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "error: %s\n", outputs.status().to_string().c_str());
    return 1;
  }
  for (size_t o = 0; o < outputs->size(); ++o) {
    const baton::Tensor& t = (*outputs)[o];
    std::printf("output %zu: %s %s", o, std::string(baton::dtype_name(t.dtype())).c_str(),
                baton::shape_to_string(t.sizes()).c_str());
    if (t.dtype() == baton::DType::Float32) {
      for (int64_t k = 0; k < std::min<int64_t>(4, t.numel()); ++k)
        std::printf(" %.6g", t.data_as<float>()[k]);
    }
    std::printf("\n");
  }
  return 0;
}
