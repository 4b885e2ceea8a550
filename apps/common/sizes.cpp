#include "sizes.hpp"

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>

namespace skinny::apps {

std::uint64_t parse_size(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + text + "' " + why);
  };
  const std::string grammar = "is not a size: expected bytes with an optional suffix K, M, G or T (powers of 1024), e.g. 512M or 2G";
  std::size_t i = 0;
  // The number: digits with an optional fraction, read without the locale (long double: exact for any
  // whole count of bytes up to 2^64, and for the fractions people write).
  long double value = 0;
  std::size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits)
    value = value * 10 + (text[i] - '0');
  if (i < text.size() && text[i] == '.') {
    long double scale = 0.1L;
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits, scale /= 10)
      value += (text[i] - '0') * scale;
  }
  if (digits == 0) throw bad(grammar);
  // The suffix: B alone, or K, M, G or T alone or followed by B or iB.
  std::string suffix;
  for (; i < text.size(); ++i) suffix.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  long double unit = 1;
  if (!suffix.empty() && suffix != "B") {
    const std::string prefixes = "KMGT";
    const std::size_t power = prefixes.find(suffix[0]);
    const std::string rest = suffix.substr(1);
    if (power == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB")) throw bad(grammar);
    for (std::size_t p = 0; p <= power; ++p) unit *= 1024;
  }
  const long double bytes = std::floor(value * unit);
  if (bytes < 1) throw bad("is less than one byte: a size must be > 0");
  if (bytes > 18446744073709551615.0L) throw bad("is more than 2^64 - 1 bytes");
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace skinny::apps
