#include "backends/cuda/builder/nvrtc_compile.h"

#include <memory>

#include "backends/cuda/builder/device_code.h"
#include "backends/cuda/cuda_check.h"

namespace baton::cuda {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};

}  // namespace

uint32_t nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return static_cast<uint32_t>(major * 1000 + minor * 10);
}

Result<std::vector<uint8_t>> compile_to_cubin(const std::string& source, uint32_t sm_arch,
                                              const std::string& what) {
  std::vector<const char*> names, texts;
  for (const DeviceHeader& h : device_headers()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  auto program = std::unique_ptr<nvrtcProgram, ProgramDeleter>(new nvrtcProgram(nullptr));
  BATON_CUDA_CHECK(nvrtcCreateProgram(program.get(), source.c_str(), "baton_engine.cu",
                                      static_cast<int>(names.size()), texts.data(), names.data()));
  const std::string arch = fmt::format("--gpu-architecture=sm_{}", sm_arch);
  const char* options[] = {arch.c_str(), "--std=c++17", "--device-as-default-execution-space"};
  const nvrtcResult compiled = nvrtcCompileProgram(*program, 3, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(*program, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtcGetProgramLog(*program, log.data());
    return BATON_ERROR(Internal, "NVRTC could not compile the kernels of {} for sm_{}: {}\n{}",
                       what, sm_arch, nvrtcGetErrorString(compiled), log);
  }
  size_t size = 0;
  BATON_CUDA_CHECK(nvrtcGetCUBINSize(*program, &size));
  std::vector<uint8_t> cubin(size);
  BATON_CUDA_CHECK(nvrtcGetCUBIN(*program, reinterpret_cast<char*>(cubin.data())));
  return cubin;
}

}  // namespace baton::cuda
