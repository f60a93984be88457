// Where a tensor lives: a device type and an index ("cpu", "cuda:1").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baton {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };

inline constexpr int kMaxDeviceIndex = 255;

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = 0;

  static constexpr Device cpu() { return Device{DeviceType::CPU, 0}; }
  static constexpr Device cuda(int16_t i) { return Device{DeviceType::CUDA, i}; }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  // "cpu" or "cuda:N".
  std::string to_string() const;
  // Accepts "cpu", "cuda" (index 0) and "cuda:N" with 0 <= N <= kMaxDeviceIndex.
  static std::optional<Device> parse(std::string_view text);

  friend bool operator==(const Device&, const Device&) = default;
};

std::string_view device_type_name(DeviceType type);
bool is_valid_device_type(int code);

}  // namespace baton
