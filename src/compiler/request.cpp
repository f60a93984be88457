#include "baton/compiler/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "baton/core/check.h"

namespace baton::compiler {
namespace {

// "max_partition_nodes" as the front end spells it: --max-partition-nodes or max_partition_nodes=.
std::string option(const CompileRequest& r, std::string name) {
  if (r.spelling == CompileRequest::Spelling::Python) return name + "=";
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

// An option with the value given: --io 'sideways' or io='sideways'.
std::string given(const CompileRequest& r, const std::string& name, const std::string& value) {
  if (r.spelling == CompileRequest::Spelling::Python) return fmt::format("{}='{}'", name, value);
  return fmt::format("{} '{}'", option(r, name), value);
}

bool parse_size(std::string_view text, int64_t& out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

}  // namespace

Result<DimRange> parse_dim_range(std::string_view text) {
  const size_t eq = text.rfind('=');
  const size_t dots = text.find("..", eq == std::string_view::npos ? 0 : eq);
  const auto bad = [&](std::string_view why) {
    return BATON_ERROR(InvalidArgument,
                       "--dim '{}' {}: it must look like NAME=MIN..MAX, NAME=MIN..MAX@OPT (e.g. "
                       "batch=1..32) or NAME=OTHER (NAME is the same dimension as OTHER)",
                       text, why);
  };
  if (eq == std::string_view::npos || eq == 0) return bad("is not a range");
  DimRange d;
  d.name = std::string(text.substr(0, eq));
  if (dots == std::string_view::npos) {
    // NAME=OTHER: the same dimension as OTHER. Names are what exporters write: letters, digits,
    // '_' and the like, never starting with a digit (which would be a size missing its range).
    const std::string_view other = text.substr(eq + 1);
    if (other.empty() || std::isdigit(static_cast<unsigned char>(other[0])) ||
        other.find_first_of("=.@ ") != std::string_view::npos) {
      return bad("is not a range");
    }
    BATON_CHECK_OR_RETURN(other != d.name, InvalidArgument,
                          "--dim '{}': a dimension cannot be the same as itself", text);
    d.same_as = std::string(other);
    return d;
  }
  const std::string_view lo = text.substr(eq + 1, dots - eq - 1);
  std::string_view hi = text.substr(dots + 2);
  std::string_view opt;
  if (const size_t at = hi.find('@'); at != std::string_view::npos) {
    opt = hi.substr(at + 1);
    hi = hi.substr(0, at);
    if (!parse_size(opt, d.opt)) return bad(fmt::format("has '{}' for OPT", opt));
  }
  if (!parse_size(lo, d.min)) return bad(fmt::format("has '{}' for MIN", lo));
  if (!parse_size(hi, d.max)) return bad(fmt::format("has '{}' for MAX", hi));
  BATON_CHECK_OR_RETURN(d.min >= 1 && d.min <= d.max, InvalidArgument,
                        "--dim '{}': the range must satisfy 1 <= MIN <= MAX", text);
  BATON_CHECK_OR_RETURN(opt.empty() || (d.min <= d.opt && d.opt <= d.max), InvalidArgument,
                        "--dim '{}': OPT {} lies outside {}..{}", text, d.opt, d.min, d.max);
  return d;
}

Result<CompileSetup> make_compile_setup(const CompileRequest& r) {
  CompileSetup setup;
  CompileOptions& options = setup.options;
  BATON_CHECK_OR_RETURN(r.io == "host" || r.io == "device", InvalidArgument,
                        "{}: expected 'host' or 'device'", given(r, "io", r.io));
  options.io = r.io == "device" ? MethodIo::Device : MethodIo::Host;
  BATON_CHECK_OR_RETURN(r.fallback == "allow" || r.fallback == "warn" || r.fallback == "error",
                        InvalidArgument, "{}: expected 'allow', 'warn' or 'error'",
                        given(r, "fallback", r.fallback));
  options.fallback = r.fallback == "allow"  ? FallbackPolicy::Allow
                     : r.fallback == "warn" ? FallbackPolicy::Warn
                                            : FallbackPolicy::Error;
  for (const std::string& pair : r.state) {
    if (pair == "auto") {
      options.state_auto = true;
      continue;
    }
    const size_t eq = pair.find('=');
    BATON_CHECK_OR_RETURN(eq != std::string::npos && eq > 0 && eq + 1 < pair.size() &&
                              pair.find('=', eq + 1) == std::string::npos,
                          InvalidArgument,
                          "{}: expected INPUT=OUTPUT (a model input and the output that updates "
                          "it, e.g. past_key_0=present_key_0) or 'auto'",
                          given(r, "state", pair));
    options.state.push_back({pair.substr(0, eq), pair.substr(eq + 1)});
  }
  BATON_CHECK_OR_RETURN(
      r.sample.empty() || r.sample == "greedy" || r.sample.rfind("top-k=", 0) == 0, InvalidArgument,
      "{}: expected 'greedy' (the most likely token) or 'top-k=K' (drawn from "
      "the K most likely, with a temperature and top-p given per call; "
      "docs/generate.md)",
      given(r, "sample", r.sample));
  options.sample = r.sample;
  options.max_partition_nodes = r.max_partition_nodes;
  options.optimize = r.optimize;
  options.disabled_passes = r.disabled_passes;
  options.expose_intermediates = r.expose_intermediates;
  options.max_fold_bytes = r.max_fold_bytes;
  options.max_total_fold_bytes = r.max_total_fold_bytes;
  options.max_fold_work = r.max_fold_work;
  options.max_arena_bytes = r.max_arena_bytes;
  options.input_shapes = r.input_shapes;
  for (const DimRange& d : r.dims) {
    BATON_CHECK_OR_RETURN(std::count_if(r.dims.begin(), r.dims.end(),
                                        [&](const DimRange& o) { return o.name == d.name; }) == 1,
                          InvalidArgument, "{}: dimension '{}' is given a range twice",
                          r.spelling == CompileRequest::Spelling::Python ? "dims=" : "--dim",
                          d.name);
  }
  const char* dim_flag = r.spelling == CompileRequest::Spelling::Python ? "dims=" : "--dim";
  for (const DimRange& d : r.dims) {
    if (d.same_as.empty()) continue;
    const auto target = std::find_if(r.dims.begin(), r.dims.end(),
                                     [&](const DimRange& o) { return o.name == d.same_as; });
    BATON_CHECK_OR_RETURN(target != r.dims.end(), InvalidArgument,
                          "{}: '{}' is the same dimension as '{}', which has no range: give it "
                          "one ({} {}=MIN..MAX)",
                          dim_flag, d.name, d.same_as, dim_flag, d.same_as);
    BATON_CHECK_OR_RETURN(target->same_as.empty(), InvalidArgument,
                          "{}: '{}' is the same dimension as '{}', which is itself the same as "
                          "'{}': name the one with the range ({} {}={})",
                          dim_flag, d.name, d.same_as, target->same_as, dim_flag, d.name,
                          target->same_as);
  }
  options.dims = r.dims;
  if (!r.target_device.empty()) options.target_device = r.target_device;
  if (r.strict_staging) options.delegate_specs.emplace_back("strict_staging", "1");
  Result<TargetDevices> targets = parse_target_devices(r.device);
  BATON_CHECK_OR_RETURN(targets.ok(), InvalidArgument, "{}: {}", given(r, "device", r.device),
                        targets.status().message());
  options.targets = std::move(targets).value();
  const std::vector<Device> devices = distinct_devices(options.targets);
  const bool gpu = !devices.empty();
  BATON_CHECK_OR_RETURN(
      gpu || (r.arch.empty() && r.precision.empty() && r.target_device.empty() && r.io == "host" &&
              !r.strict_staging && r.max_partition_nodes == 0 && r.cuda_options.empty()),
      InvalidArgument, "{}, {}, {}, {}, {}, {} and {} apply to GPU targets: add {}",
      option(r, "arch"), option(r, "precision"), option(r, "target_device"),
      r.spelling == CompileRequest::Spelling::Python ? "io='device'" : "--io device",
      option(r, "strict_staging"), option(r, "max_partition_nodes"),
      r.spelling == CompileRequest::Spelling::Python ? "cuda_options=" : "--cuda-option",
      r.spelling == CompileRequest::Spelling::Python ? "device='cuda:N'" : "--device cuda:N");
  // One engine builder per GPU; the compiler places each partition on one of them.
  for (const Device& d : devices) {
    Result<std::unique_ptr<BackendCompiler>> made =
        make_backend_compiler(TargetSpec{d, r.arch, r.precision, r.cuda_options});
    if (!made.ok() && made.status().message().find("CUDA build option") != std::string::npos) {
      // Say which front-end option carried the bad KEY=VALUE.
      return Status(made.code(),
                    fmt::format("{}: {}",
                                r.spelling == CompileRequest::Spelling::Python ? "cuda_options="
                                                                               : "--cuda-option",
                                made.status().message()));
    }
    BATON_ASSIGN_OR_RETURN(auto b, std::move(made));
    options.backends.push_back(b.get());
    setup.builders.push_back(std::move(b));
  }
  return setup;
}

}  // namespace baton::compiler
