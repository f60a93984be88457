#include "baton/core/device.h"

#include <charconv>

namespace baton {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
  }
  return "invalid";
}

bool is_valid_device_type(int code) { return code == 0 || code == 1; }

std::string Device::to_string() const {
  if (type == DeviceType::CPU) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

std::optional<Device> Device::parse(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view digits = text.substr(kPrefix.size());
  int value = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  if (value < 0 || value > kMaxDeviceIndex) return std::nullopt;
  return Device::cuda(static_cast<int16_t>(value));
}

}  // namespace baton
