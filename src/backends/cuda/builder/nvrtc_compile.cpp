#include "backends/cuda/builder/nvrtc_compile.h"

#include <nvJitLink.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "backends/cuda/builder/device_code.h"
#include "backends/cuda/cuda_check.h"
#include "baton/core/log.h"

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

namespace {

// One NVRTC program: `source` for sm_`sm_arch`, relocatable when it is one unit of several.
Result<std::vector<uint8_t>> compile_unit(const std::string& source, uint32_t sm_arch,
                                          const std::string& what, bool relocatable) {
  std::vector<const char*> names, texts;
  for (const DeviceHeader& h : device_headers()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  auto program = std::unique_ptr<nvrtcProgram, ProgramDeleter>(new nvrtcProgram(nullptr));
  BATON_CUDA_CHECK(nvrtcCreateProgram(program.get(), source.c_str(), "baton_engine.cu",
                                      static_cast<int>(names.size()), texts.data(), names.data()));
  const std::string arch = fmt::format("--gpu-architecture=sm_{}", sm_arch);
  std::vector<const char*> options = {arch.c_str(), "--std=c++17",
                                      "--device-as-default-execution-space"};
  if (relocatable) options.push_back("--relocatable-device-code=true");
  const nvrtcResult compiled =
      nvrtcCompileProgram(*program, static_cast<int>(options.size()), options.data());
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

struct LinkDeleter {
  void operator()(nvJitLinkHandle* h) const {
    nvJitLinkDestroy(h);
    delete h;
  }
};

std::string link_log(nvJitLinkHandle h) {
  size_t size = 0;
  if (nvJitLinkGetErrorLogSize(h, &size) != NVJITLINK_SUCCESS || size == 0) return std::string();
  std::string log(size, '\0');
  nvJitLinkGetErrorLog(h, log.data());
  return log;
}

// The relocatable cubins of the units linked into one executable cubin.
Result<std::vector<uint8_t>> link_units(const std::vector<std::vector<uint8_t>>& units,
                                        uint32_t sm_arch, const std::string& what) {
  const std::string arch = fmt::format("-arch=sm_{}", sm_arch);
  const char* options[] = {arch.c_str()};
  auto handle = std::unique_ptr<nvJitLinkHandle, LinkDeleter>(new nvJitLinkHandle(nullptr));
  nvJitLinkResult r = nvJitLinkCreate(handle.get(), 1, options);
  BATON_CHECK_OR_RETURN(r == NVJITLINK_SUCCESS, Internal,
                        "nvJitLinkCreate for the kernels of {} (sm_{}) failed: status {}", what,
                        sm_arch, static_cast<int>(r));
  for (size_t u = 0; u < units.size(); ++u) {
    const std::string name = fmt::format("unit{}.cubin", u);
    r = nvJitLinkAddData(*handle, NVJITLINK_INPUT_CUBIN, units[u].data(), units[u].size(),
                         name.c_str());
    BATON_CHECK_OR_RETURN(r == NVJITLINK_SUCCESS, Internal,
                          "nvJitLink could not add unit {} of the kernels of {}: status {}\n{}", u,
                          what, static_cast<int>(r), link_log(*handle));
  }
  r = nvJitLinkComplete(*handle);
  BATON_CHECK_OR_RETURN(r == NVJITLINK_SUCCESS, Internal,
                        "nvJitLink could not link the {} units of the kernels of {}: status {}\n{}",
                        units.size(), what, static_cast<int>(r), link_log(*handle));
  size_t size = 0;
  r = nvJitLinkGetLinkedCubinSize(*handle, &size);
  BATON_CHECK_OR_RETURN(r == NVJITLINK_SUCCESS, Internal,
                        "nvJitLinkGetLinkedCubinSize for {}: status {}", what, static_cast<int>(r));
  std::vector<uint8_t> cubin(size);
  r = nvJitLinkGetLinkedCubin(*handle, cubin.data());
  BATON_CHECK_OR_RETURN(r == NVJITLINK_SUCCESS, Internal,
                        "nvJitLinkGetLinkedCubin for {}: status {}", what, static_cast<int>(r));
  return cubin;
}

}  // namespace

Result<std::vector<uint8_t>> compile_to_cubin(const std::string& source, uint32_t sm_arch,
                                              const std::string& what) {
  return compile_unit(source, sm_arch, what, /*relocatable=*/false);
}

Result<std::vector<uint8_t>> compile_kernels_to_cubin(const std::string& prelude,
                                                      std::span<const std::string> kernels,
                                                      uint32_t sm_arch, const std::string& what,
                                                      unsigned threads) {
  if (kernels.size() <= kKernelsInOneUnit) {
    std::string source = prelude;
    for (const std::string& k : kernels) source += k;
    return compile_unit(source, sm_arch, what, /*relocatable=*/false);
  }
  const size_t n_units = (kernels.size() + kKernelsPerUnit - 1) / kKernelsPerUnit;
  std::vector<std::string> sources(n_units, prelude);
  for (size_t k = 0; k < kernels.size(); ++k) sources[k / kKernelsPerUnit] += kernels[k];
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, n_units));

  std::vector<std::vector<uint8_t>> cubins(n_units);
  std::vector<Status> failures(n_units);
  std::atomic<size_t> next{0}, done{0};
  std::mutex report;
  const auto started = std::chrono::steady_clock::now();
  auto last_report = started;
  auto work = [&] {
    for (size_t u = next++; u < n_units; u = next++) {
      Result<std::vector<uint8_t>> cubin = compile_unit(
          sources[u], sm_arch, fmt::format("{} (unit {} of {})", what, u + 1, n_units), true);
      if (cubin.ok()) {
        cubins[u] = std::move(cubin).value();
      } else {
        failures[u] = cubin.status();
      }
      const size_t finished = ++done;
      // A long compile says how far it is, every few seconds (NVRTC takes about 15 ms a kernel).
      std::lock_guard<std::mutex> lock(report);
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::seconds(3) && finished < n_units) {
        last_report = now;
        log_message(
            LogLevel::Info, "cuda",
            fmt::format("{}: compiled {} of {} units of {} kernels ({} kernels) in {:.1f} s "
                        "on {} threads",
                        what, finished, n_units, kKernelsPerUnit, kernels.size(),
                        std::chrono::duration<double>(now - started).count(), threads));
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const Status& f : failures) {
    if (!f.ok()) return f;
  }
  return link_units(cubins, sm_arch, what);
}

}  // namespace baton::cuda
