// The device list's text form, shared by `baton compile --device` and the Python package's
// `device=` (compiler.h). Only text is read here: the placement pass applies the result.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "baton/compiler/compiler.h"
#include "baton/core/check.h"

namespace baton::compiler {

Result<TargetDevices> parse_target_devices(std::string_view text) {
  TargetDevices out;
  if (text == "cpu") return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item(text.substr(start, end - start));
    start = end + 1;
    std::string device_text = item;
    int index = -1;
    if (const size_t eq = item.find('='); eq != std::string::npos) {
      char* stop = nullptr;
      index = static_cast<int>(std::strtol(item.c_str(), &stop, 10));
      BATON_CHECK_OR_RETURN(stop == item.c_str() + eq && eq > 0 && index >= 0, InvalidArgument,
                            "device list '{}': '{}' should be PARTITION=DEVICE, e.g. 0=cuda:1",
                            text, item);
      device_text = item.substr(eq + 1);
    }
    const std::optional<Device> d = Device::parse(device_text);
    BATON_CHECK_OR_RETURN(d.has_value() && d->is_cuda(), InvalidArgument,
                          "device list '{}': '{}' is not a GPU (expected cuda:N); use \"cpu\" "
                          "alone for the CPU",
                          text, device_text);
    if (index >= 0) {
      BATON_CHECK_OR_RETURN(out.by_partition.emplace(index, *d).second, InvalidArgument,
                            "device list '{}': partition {} is given twice", text, index);
    } else {
      out.round_robin.push_back(*d);
    }
  }
  BATON_CHECK_OR_RETURN(out.round_robin.empty() || out.by_partition.empty(), InvalidArgument,
                        "device list '{}': use either a list of devices or a PARTITION=DEVICE map, "
                        "not both",
                        text);
  return out;
}

std::vector<Device> distinct_devices(const TargetDevices& targets) {
  std::vector<Device> named = targets.round_robin;
  for (const auto& [index, device] : targets.by_partition) named.push_back(device);
  std::vector<Device> out;
  for (const Device& d : named) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

}  // namespace baton::compiler
