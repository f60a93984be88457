// NVTX ranges for Nsight Systems: each execute and each instruction shows up by name on the
// calling thread's timeline. NVTX3 is a header-only C library (it ships with the CUDA toolkit but
// calls no CUDA); until a tool such as nsys injects itself, every call returns at once and
// allocates nothing. Built without the headers (BATON_HAS_NVTX unset), the ranges are empty.
#pragma once

#include <string>

#if BATON_HAS_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace baton::runtime {

#if BATON_HAS_NVTX
using NvtxDomain = nvtxDomainHandle_t;
// The "baton" domain, created on the first call (at load, so never inside a warm execute).
inline NvtxDomain nvtx_domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("baton");
  return domain;
}
#else
using NvtxDomain = void*;
inline NvtxDomain nvtx_domain() { return nullptr; }
#endif

// Pushes a range named `name` (which must outlive it) in `domain`, pops it when destroyed.
class NvtxRange {
 public:
  NvtxRange(NvtxDomain domain, const std::string& name) : domain_(domain) {
#if BATON_HAS_NVTX
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name.c_str();
    nvtxDomainRangePushEx(domain_, &a);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if BATON_HAS_NVTX
    nvtxDomainRangePop(domain_);
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  [[maybe_unused]] NvtxDomain domain_;
};

}  // namespace baton::runtime
