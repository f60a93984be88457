// Showing names that are bytes: tensor, node, delegate and kernel names come from models and
// program files unchecked, and need not be UTF-8. JSON (which nlohmann::json refuses to write from
// invalid UTF-8) and terminals get them through these functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace baton {

// Whether `bytes` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// `bytes` with every well-formed UTF-8 sequence kept and every other byte written as the four
// characters \xNN (lowercase hex): "NODE\xff\xfe" becomes the text NODE\xff\xfe. The result
// is valid UTF-8; valid input comes back unchanged.
std::string escape_invalid_utf8(std::string_view bytes);

// escape_invalid_utf8, and control characters (U+0000..U+001F, U+007F) written as \xNN too, so a
// name cannot move the cursor or inject terminal escape sequences.
std::string printable_text(std::string_view bytes);

// A size for people: "512 B", "68.1 KiB", "12.40 MiB", "1.25 GiB" (powers of 1024).
std::string size_text(uint64_t bytes);

}  // namespace baton
