#include "report_file.h"

#include "baton/core/file.h"

namespace baton::tool {

Status write_text_file(const std::string& path, const std::string& text) {
  return write_file_atomically(path, std::string_view(text));
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
