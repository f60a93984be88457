// baton ops: which operators this build runs, from the registries themselves: the definitions
// (src/ops), the CPU kernels (src/kernels/cpu) and the GPU lowerings (builder/ops/registry.cpp).
// docs/operators.md's support matrix is this output, and a test fails when the committed copy
// differs (scripts/op_table.py), so the documented table cannot drift from the code.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "baton/core/dtype.h"
#include "commands.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"

namespace baton::tool {
namespace {

// "float32, float16, bfloat16" in DType order.
std::string dtypes_text(DTypeSet set) {
  std::string out;
  for (int t = 0; t < 32; ++t) {
    const auto dtype = static_cast<DType>(t);
    if (!set.contains(dtype)) continue;
    const std::string_view name = dtype_name(dtype);
    if (name.empty() || name == "unknown") continue;
    out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
  }
  return out.empty() ? "-" : out;
}

// The CPU kernel's element types per type constraint of definition `def` ("T: float32, ...";
// constraints the kernel does not narrow take what the definition allows).
std::string cpu_types(const ops::OpDef& def, const runtime::KernelDef& kernel) {
  std::string out;
  for (const ops::TypeConstraint& c : def.types) {
    DTypeSet set = c.types;
    for (const auto& [name, types] : kernel.types) {
      if (name == c.name) set = set & types;
    }
    out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", c.name, dtypes_text(set));
  }
  return out.empty() ? "-" : out;
}

// Ops with no CUDA lowering of their own that an optimizer pass rewrites into ops the GPU takes,
// where it can: their CUDA column says so instead of a bare "-".
std::string rewritten_for_gpu(const std::string& domain, const std::string& op) {
  if (domain.empty() && op == "Einsum") {
    return "- (a two-operand Einsum that is one batched matrix product becomes a MatMul: the "
           "einsum pass)";
  }
  return "-";
}

}  // namespace

Status run_ops() {
  std::map<std::pair<std::string, std::string>, DTypeSet> gpu;
  for (GpuLowering& l : gpu_lowered_ops()) gpu[{std::move(l.domain), std::move(l.op)}] = l.types;
  // Newest definition per (domain, op), and every opset it changed at.
  struct Row {
    const ops::OpDef* newest = nullptr;
    std::vector<int> opsets;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const ops::OpDef* def : ops::op_registry().all()) {
    Row& r = rows[{std::string(def->domain), std::string(def->name)}];
    r.opsets.push_back(def->since_version);
    if (r.newest == nullptr || def->since_version > r.newest->since_version) r.newest = def;
  }
  std::printf("| operator | opsets | CPU kernel: element types | CUDA: element types |\n");
  std::printf("|---|---|---|---|\n");
  int cpu_count = 0, gpu_count = 0;
  for (auto& [key, row] : rows) {
    std::sort(row.opsets.begin(), row.opsets.end());
    std::string opsets;
    for (int v : row.opsets) opsets += fmt::format("{}{}", opsets.empty() ? "" : ", ", v);
    const std::string name =
        key.first.empty() ? key.second : fmt::format("{} ({})", key.second, key.first);
    const runtime::KernelDef* kernel = runtime::kernel_registry().find(key.second, key.first);
    const auto lowered = gpu.find(key);
    const bool on_gpu = lowered != gpu.end();
    cpu_count += kernel != nullptr;
    gpu_count += on_gpu;
    std::printf("| %s | %s | %s | %s |\n", name.c_str(), opsets.c_str(),
                kernel != nullptr ? cpu_types(*row.newest, *kernel).c_str() : "none",
                on_gpu ? dtypes_text(lowered->second).c_str()
                       : rewritten_for_gpu(key.first, key.second).c_str());
  }
  std::printf("\n%zu operators: %d with a CPU kernel, %d with a CUDA lowering.\n", rows.size(),
              cpu_count, gpu_count);
  return Status();
}

}  // namespace baton::tool
