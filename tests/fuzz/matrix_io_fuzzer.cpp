// libFuzzer target for the readers of untrusted files: the first byte picks the reader (.npy as float or
// double, CSV, raw binary), the rest is the file. A reader may refuse its input with std::runtime_error;
// anything else (a crash, a sanitizer report, another exception, a result whose shape does not match
// its values) is a bug.
#include "common/matrix_io.hpp"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

template <class T>
void check(const skinny::apps::HostData<T>& m) {
  if (m.rows < 1 || m.cols < 1 || static_cast<std::int64_t>(m.values.size()) != m.rows * m.cols) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace skinny::apps;
  if (size < 1) return 0;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    switch (data[0] % 4) {
      case 0: check(read_npy<float>(in, "fuzz.npy")); break;
      case 1: check(read_npy<double>(in, "fuzz.npy")); break;
      case 2: check(read_csv<float>(in, "fuzz.csv")); break;
      default: check(read_raw<double>(in, "fuzz.bin", 1 + data[0] / 4 % 8, data[0] & 0x80 ? RawType::f64 : RawType::f32));
    }
  } catch (const std::runtime_error&) {
    // refused with a message: the expected outcome for malformed input
  }
  return 0;
}
