#include "baton/core/text.h"

#include <fmt/format.h>

#include <cstdint>

namespace baton {
namespace {

// The length of the well-formed UTF-8 sequence at bytes[i], or 0 when there is none.
size_t sequence_length(std::string_view bytes, size_t i) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  const uint8_t b0 = at(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (bytes.size() - i < n) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return n;
}

void append_hex(std::string& out, uint8_t byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0xF];
}

std::string escape(std::string_view bytes, bool controls) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = sequence_length(bytes, i);
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (n == 0 || (controls && n == 1 && (b < 0x20 || b == 0x7F))) {
      append_hex(out, b);
      ++i;
      continue;
    }
    out.append(bytes.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = sequence_length(bytes, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  return escape(bytes, false);
}

std::string printable_text(std::string_view bytes) { return escape(bytes, true); }

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace baton
