// A small streaming JSON writer: enough for benchmark and result files, no dependency.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace skinny::apps {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  /// The key of the next value inside an object.
  JsonWriter& key(std::string_view k) {
    separate();
    write_string(k);
    out_ << ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(std::string_view s) { return raw_value([&] { write_string(s); }); }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) { return raw_value([&] { out_ << (b ? "true" : "false"); }); }
  JsonWriter& value(double d) {
    return raw_value([&] {
      if (!std::isfinite(d)) {
        out_ << "null";  // JSON has no NaN/Inf
        return;
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.10g", d);
      out_ << buf;
    });
  }
  JsonWriter& value(std::int64_t i) { return raw_value([&] { out_ << i; }); }
  JsonWriter& value(int i) { return value(std::int64_t(i)); }
  JsonWriter& value(std::uint64_t i) { return raw_value([&] { out_ << i; }); }
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  std::string str() const { return out_.str(); }

 private:
  template <class F>
  JsonWriter& raw_value(F&& write) {
    separate();
    write();
    return *this;
  }
  JsonWriter& open(char c) {
    separate();
    out_ << c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char c) {
    first_.pop_back();
    out_ << c;
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ << ',';
      first_.back() = false;
    }
  }
  void write_string(std::string_view s) {
    out_ << '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out_ << '\\' << ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ << buf;
      } else {
        out_ << ch;
      }
    }
    out_ << '"';
  }

  std::ostringstream out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace skinny::apps
