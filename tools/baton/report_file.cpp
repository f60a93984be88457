#include "report_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "baton/core/check.h"

namespace baton::tool {

Status write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  BATON_CHECK_OR_RETURN(f != nullptr, IoError, "cannot write '{}': {}", tmp, std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!written || !closed) {
    std::filesystem::remove(tmp, ec);
    return BATON_ERROR(IoError, "cannot write '{}' (disk full?)", path);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return BATON_ERROR(IoError, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  return Status();
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void ChromeTrace::thread_name(int tid, const std::string& name) {
  events_.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}});
}

void ChromeTrace::span(const std::string& name, const std::string& category, int tid,
                       Clock::time_point start, double duration_ms, nlohmann::json args) {
  span_us(name, category, tid, micros(start), duration_ms * 1000.0, std::move(args));
}

void ChromeTrace::span_us(const std::string& name, const std::string& category, int tid,
                          double start_us, double duration_us, nlohmann::json args) {
  events_.push_back({{"name", name},
                     {"cat", category},
                     {"ph", "X"},
                     {"pid", 1},
                     {"tid", tid},
                     {"ts", start_us},
                     {"dur", duration_us},
                     {"args", std::move(args)}});
}

Status ChromeTrace::write(const std::string& path, const nlohmann::json& about) const {
  nlohmann::json doc = {{"traceEvents", events_}, {"displayTimeUnit", "ms"}, {"otherData", about}};
  return write_text_file(path, json_text(doc));
}

}  // namespace baton::tool
