#include "matrix_io.hpp"

#include "files.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <type_traits>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .npy and raw readers assume a little-endian host");

namespace skinny::apps {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw std::runtime_error(name + ": " + what); }

std::string lower_extension(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

/// Bytes from the stream's position to its end (the stream must be seekable: files and string streams).
std::int64_t bytes_left(std::istream& in) {
  const auto here = in.tellg();
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(here);
  if (here < 0 || end < 0 || !in) return -1;
  return static_cast<std::int64_t>(end - here);
}

/// rows * cols * elem_bytes, refusing empty shapes and products that overflow.
std::int64_t data_bytes(const std::string& name, std::int64_t rows, std::int64_t cols, int elem_bytes) {
  if (rows < 1 || cols < 1)
    fail(name, "empty matrix (" + std::to_string(rows) + " x " + std::to_string(cols) + "): need at least 1 x 1");
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / elem_bytes;
  if (rows > limit / cols) fail(name, "shape " + std::to_string(rows) + " x " + std::to_string(cols) + " is too large");
  return rows * cols * elem_bytes;
}

/// An IEEE half-precision value as stored in a float16 .npy file, converted exactly to float.
struct Float16 {
  std::uint16_t bits;
  explicit operator float() const {
    const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
    if (exponent == 0x1f) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
    if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
    return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
};

/// Reads `count` values of U from the stream and converts them to T.
template <class T, class U>
std::vector<T> read_values(std::istream& in, const std::string& name, std::int64_t count) {
  std::vector<T> out(static_cast<std::size_t>(count));
  if constexpr (std::is_same_v<T, U>) {
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count * sizeof(U)));
    if (in.gcount() != static_cast<std::streamsize>(count * sizeof(U))) fail(name, "truncated data");
  } else {
    std::vector<U> buf(static_cast<std::size_t>(std::min<std::int64_t>(count, 1 << 20)));
    for (std::int64_t done = 0; done < count;) {
      const std::int64_t n = std::min<std::int64_t>(count - done, static_cast<std::int64_t>(buf.size()));
      in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n * sizeof(U)));
      if (in.gcount() != static_cast<std::streamsize>(n * sizeof(U))) fail(name, "truncated data");
      for (std::int64_t i = 0; i < n; ++i)
        out[static_cast<std::size_t>(done + i)] = static_cast<T>(static_cast<float>(buf[std::size_t(i)]));
      done += n;
    }
  }
  return out;
}

// ---- .npy header: "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" -----------------------

/// The text after `'key':` in the header dict (leading spaces skipped), or fails.
std::string_view npy_value(const std::string& name, std::string_view dict, const char* key) {
  const std::string quoted = std::string("'") + key + "'";
  const auto at = dict.find(quoted);
  if (at == std::string_view::npos) fail(name, std::string(".npy header has no '") + key + "' entry");
  std::size_t i = at + quoted.size();
  while (i < dict.size() && dict[i] == ' ') ++i;
  if (i >= dict.size() || dict[i] != ':') fail(name, std::string(".npy header: no ':' after '") + key + "'");
  ++i;
  while (i < dict.size() && dict[i] == ' ') ++i;
  return dict.substr(i);
}

NpyHeader parse_npy_header(const std::string& name, std::string_view dict) {
  NpyHeader h;
  const std::string_view descr = npy_value(name, dict, "descr");
  const auto close = descr.size() > 1 && descr[0] == '\'' ? descr.find('\'', 1) : std::string_view::npos;
  if (close == std::string_view::npos) fail(name, ".npy header: 'descr' is not a quoted string");
  const std::string type(descr.substr(1, close - 1));
  if (type == "<f2" || type == "=f2") {
    h.elem_bytes = 2;
  } else if (type == "<f4" || type == "=f4") {
    h.elem_bytes = 4;
  } else if (type == "<f8" || type == "=f8") {
    h.elem_bytes = 8;
  } else {
    fail(name, ".npy dtype '" + type +
                   "' is not supported (need little-endian float16 '<f2', float32 '<f4' or float64 '<f8')");
  }
  const std::string_view order = npy_value(name, dict, "fortran_order");
  if (order.substr(0, 4) == "True") fail(name, ".npy array is in Fortran order; save it in C order (np.ascontiguousarray)");
  if (order.substr(0, 5) != "False") fail(name, ".npy header: 'fortran_order' is neither True nor False");

  const std::string_view shape = npy_value(name, dict, "shape");
  if (shape.empty() || shape[0] != '(') fail(name, ".npy header: 'shape' is not a tuple");
  const auto end = shape.find(')');
  if (end == std::string_view::npos) fail(name, ".npy header: 'shape' tuple is not closed");
  std::vector<std::int64_t> dims;
  std::size_t i = 1;
  while (i < end) {
    while (i < end && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i >= end) break;
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (i < end && shape[i] >= '0' && shape[i] <= '9') {
      if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail(name, ".npy header: dimension too large");
      v = v * 10 + (shape[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0) fail(name, ".npy header: 'shape' holds something other than non-negative integers");
    dims.push_back(v);
  }
  if (dims.size() != 2 && dims.size() != 1)
    fail(name, ".npy array has " + std::to_string(dims.size()) +
                   " dimension(s); need a 2-D array (rows x columns) or a 1-D one (a column)");
  h.rows = dims[0];
  h.cols = dims.size() == 2 ? dims[1] : 1;
  return h;
}

template <class T>
const char* npy_descr() {
  if constexpr (std::is_same_v<T, float>) return "<f4";
  if constexpr (std::is_same_v<T, double>) return "<f8";
  if constexpr (std::is_same_v<T, std::int32_t>) return "<i4";
}

// ---- CSV -----------------------------------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const auto comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

/// Parses a whole field as a number (strtod's syntax, in the C locale's format); false if it is not one.
bool parse_number(std::string_view field, double& value) {
  if (field.empty() || field.size() > 64) return false;
  char buf[72];
  std::memcpy(buf, field.data(), field.size());
  buf[field.size()] = '\0';
  char* end = nullptr;
  errno = 0;
  value = std::strtod(buf, &end);
  return end == buf + field.size();
}

}  // namespace

FileFormat format_from_path(const std::string& path) {
  const std::string ext = lower_extension(path);
  if (ext == ".npy") return FileFormat::npy;
  if (ext == ".csv" || ext == ".txt") return FileFormat::csv;
  return FileFormat::raw;
}

template <class T>
void require_finite(const T* values, std::int64_t rows, std::int64_t cols, const std::string& name) {
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t idx = 0; idx < count; ++idx) {
    if (std::isfinite(static_cast<double>(values[idx]))) continue;
    const auto row = static_cast<std::int64_t>(idx) / cols, col = static_cast<std::int64_t>(idx) % cols;
    const double v = static_cast<double>(values[idx]);
    fail(name, std::string("non-finite value (") + (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") + ") at row " +
                   std::to_string(row) + ", column " + std::to_string(col) + "; clean the data first");
  }
}

template <class T>
void require_finite(const HostData<T>& m, const std::string& name) {
  require_finite(m.values.data(), m.rows, m.cols, name);
}

NpyHeader read_npy_header(std::istream& in, const std::string& name) {
  char magic[8];
  in.read(magic, 8);
  if (in.gcount() != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(name, "not a .npy file (bad magic bytes)");
  const int major = static_cast<unsigned char>(magic[6]);
  if (major < 1 || major > 3) fail(name, ".npy format version " + std::to_string(major) + " is not supported");
  std::uint32_t header_len = 0;
  unsigned char len_bytes[4] = {0, 0, 0, 0};
  const int len_size = major == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(len_bytes), len_size);
  if (in.gcount() != len_size) fail(name, "truncated .npy header");
  for (int i = len_size - 1; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > (1u << 20)) fail(name, ".npy header length " + std::to_string(header_len) + " is implausible");
  std::string dict(header_len, '\0');
  in.read(dict.data(), header_len);
  if (in.gcount() != static_cast<std::streamsize>(header_len)) fail(name, "truncated .npy header");
  NpyHeader h = parse_npy_header(name, dict);
  h.data_bytes = data_bytes(name, h.rows, h.cols, h.elem_bytes);
  h.data_offset = 8 + len_size + static_cast<std::int64_t>(header_len);
  return h;
}

void check_npy_data(const std::string& name, const NpyHeader& h, std::int64_t have) {
  if (have >= 0 && have != h.data_bytes)
    fail(name, "header says " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                   (h.elem_bytes == 2 ? " float16" : h.elem_bytes == 4 ? " float32" : " float64") + " (" +
                   std::to_string(h.data_bytes) + " bytes) but " + std::to_string(have) + " bytes of data follow" +
                   (have < h.data_bytes ? " (truncated file)" : ""));
}

template <class T>
HostData<T> read_npy(std::istream& in, const std::string& name) {
  const NpyHeader h = read_npy_header(in, name);
  check_npy_data(name, h, bytes_left(in));
  HostData<T> m;
  m.rows = h.rows;
  m.cols = h.cols;
  m.values = h.elem_bytes == 2   ? read_values<T, Float16>(in, name, h.rows * h.cols)
             : h.elem_bytes == 4 ? read_values<T, float>(in, name, h.rows * h.cols)
                                 : read_values<T, double>(in, name, h.rows * h.cols);
  require_finite(m, name);
  return m;
}

template <class T>
HostData<T> read_csv(std::istream& in, const std::string& name) {
  HostData<T> m;
  std::string line;
  std::int64_t line_no = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const auto fields = split_fields(line);
    std::vector<double> row(fields.size());
    bool numeric = true;
    std::size_t bad = 0;
    for (std::size_t c = 0; c < fields.size() && numeric; ++c)
      if (!parse_number(fields[c], row[c])) {
        numeric = false;
        bad = c;
      }
    if (first) {
      first = false;
      m.cols = static_cast<std::int64_t>(fields.size());
      if (!numeric) continue;  // a header line: its names are not kept, its width must match the data
    }
    if (static_cast<std::int64_t>(fields.size()) != m.cols)
      fail(name, "line " + std::to_string(line_no) + " has " + std::to_string(fields.size()) + " fields, expected " +
                     std::to_string(m.cols));
    if (!numeric)
      fail(name, "line " + std::to_string(line_no) + ", column " + std::to_string(bad + 1) + ": '" +
                     std::string(fields[bad].substr(0, 32)) + "' is not a number");
    for (const double v : row) m.values.push_back(static_cast<T>(v));
    ++m.rows;
  }
  if (m.rows == 0) fail(name, "no data rows");
  require_finite(m, name);
  return m;
}

template <class T>
HostData<T> read_raw(std::istream& in, const std::string& name, std::int64_t cols, RawType type) {
  if (cols < 1) fail(name, "a raw binary file needs its number of columns (--d) >= 1");
  const int elem = type == RawType::f32 ? 4 : 8;
  const std::int64_t have = bytes_left(in);
  if (have < 0) fail(name, "cannot determine the file size");
  const std::int64_t row_bytes = cols * elem;
  if (have == 0 || have % row_bytes != 0)
    fail(name, std::to_string(have) + " bytes is not a whole number of rows of " + std::to_string(cols) + " " +
                   (elem == 4 ? "float32" : "float64") + " values (" + std::to_string(row_bytes) + " bytes per row)");
  HostData<T> m;
  m.rows = have / row_bytes;
  m.cols = cols;
  m.values = elem == 4 ? read_values<T, float>(in, name, m.rows * cols) : read_values<T, double>(in, name, m.rows * cols);
  require_finite(m, name);
  return m;
}

template <class T>
HostData<T> read_matrix(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  switch (format_from_path(path)) {
    case FileFormat::npy: return read_npy<T>(in, path);
    case FileFormat::csv: return read_csv<T>(in, path);
    case FileFormat::raw: return read_raw<T>(in, path, options.raw_cols, options.raw_type);
  }
  fail(path, "unknown format");
}

MatrixShape read_matrix_shape(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  switch (format_from_path(path)) {
    case FileFormat::npy: {
      const NpyHeader h = read_npy_header(in, path);
      const std::int64_t need = data_bytes(path, h.rows, h.cols, h.elem_bytes), have = bytes_left(in);
      if (have >= 0 && have != need)
        fail(path, "header says " + std::to_string(h.rows) + " x " + std::to_string(h.cols) + " (" + std::to_string(need) +
                       " bytes) but " + std::to_string(have) + " bytes of data follow");
      return {h.rows, h.cols};
    }
    case FileFormat::raw: {
      if (options.raw_cols < 1) fail(path, "a raw binary file needs its number of columns (--d) >= 1");
      const std::int64_t have = bytes_left(in), row_bytes = options.raw_cols * (options.raw_type == RawType::f32 ? 4 : 8);
      if (have <= 0 || have % row_bytes != 0)
        fail(path, std::to_string(have) + " bytes is not a whole number of rows of " + std::to_string(row_bytes) + " bytes");
      return {have / row_bytes, options.raw_cols};
    }
    case FileFormat::csv: break;
  }
  const HostData<double> all = read_csv<double>(in, path);
  return {all.rows, all.cols};
}

template <class T>
HostData<T> read_matrix_rows(const std::string& path, const ReadOptions& options, std::int64_t begin, std::int64_t count) {
  const MatrixShape shape = read_matrix_shape(path, options);
  if (begin < 0 || count < 0 || begin + count > shape.rows)
    fail(path, "rows " + std::to_string(begin) + " .. " + std::to_string(begin + count) + " are outside its " +
                   std::to_string(shape.rows) + " rows");
  const FileFormat format = format_from_path(path);
  HostData<T> m;
  m.rows = count;
  m.cols = shape.cols;
  if (format == FileFormat::csv) {  // text has no row offsets: read it all, keep the rows
    const HostData<T> all = read_matrix<T>(path, options);
    m.values.assign(all.values.begin() + begin * shape.cols, all.values.begin() + (begin + count) * shape.cols);
    return m;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  int elem = options.raw_type == RawType::f32 ? 4 : 8;
  if (format == FileFormat::npy) elem = read_npy_header(in, path).elem_bytes;
  in.seekg(static_cast<std::streamoff>(begin * shape.cols * elem), std::ios::cur);
  if (!in) fail(path, "cannot seek to row " + std::to_string(begin));
  m.values = elem == 2   ? read_values<T, Float16>(in, path, count * shape.cols)
             : elem == 4 ? read_values<T, float>(in, path, count * shape.cols)
                         : read_values<T, double>(in, path, count * shape.cols);
  require_finite(m, path + " (rows from " + std::to_string(begin) + ")");
  return m;
}

template <class T>
std::string npy_bytes(const T* values, std::int64_t rows, std::int64_t cols) {
  std::string dict = std::string("{'descr': '") + npy_descr<T>() + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // magic (6) + version (2) + length (2) + dict + '\n', padded with spaces to a multiple of 64.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  out.append(reinterpret_cast<const char*>(values), static_cast<std::size_t>(rows * cols) * sizeof(T));
  return out;
}

template <class T>
std::string csv_text(const T* values, std::int64_t rows, std::int64_t cols) {
  std::string out;
  char buf[40];
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const T v = values[i * cols + j];
      if constexpr (std::is_same_v<T, std::int32_t>)
        std::snprintf(buf, sizeof buf, "%d", v);
      else
        std::snprintf(buf, sizeof buf, std::is_same_v<T, float> ? "%.9g" : "%.17g", static_cast<double>(v));
      if (j > 0) out.push_back(',');
      out += buf;
    }
    out.push_back('\n');
  }
  return out;
}

void check_output_format(const std::string& path) {
  const std::string ext = lower_extension(path);
  if (ext != ".npy" && ext != ".csv" && ext != ".txt")
    throw std::runtime_error(path + ": output files must end in .npy or .csv");
}

template <class T>
void write_matrix(const std::string& path, const T* values, std::int64_t rows, std::int64_t cols) {
  check_output_format(path);
  write_file_atomically(path, format_from_path(path) == FileFormat::npy ? npy_bytes(values, rows, cols)
                                                                         : csv_text(values, rows, cols));
}

#define SKINNY_MATRIX_IO_READERS(T)                                                        \
  template HostData<T> read_matrix<T>(const std::string&, const ReadOptions&);             \
  template HostData<T> read_npy<T>(std::istream&, const std::string&);                     \
  template HostData<T> read_matrix_rows<T>(const std::string&, const ReadOptions&, std::int64_t, std::int64_t);                     \
  template HostData<T> read_csv<T>(std::istream&, const std::string&);                     \
  template HostData<T> read_raw<T>(std::istream&, const std::string&, std::int64_t, RawType); \
  template void require_finite<T>(const HostData<T>&, const std::string&);                  \
  template void require_finite<T>(const T*, std::int64_t, std::int64_t, const std::string&);
#define SKINNY_MATRIX_IO_WRITERS(T)                                                  \
  template std::string npy_bytes<T>(const T*, std::int64_t, std::int64_t);           \
  template std::string csv_text<T>(const T*, std::int64_t, std::int64_t);            \
  template void write_matrix<T>(const std::string&, const T*, std::int64_t, std::int64_t);
SKINNY_MATRIX_IO_READERS(float)
SKINNY_MATRIX_IO_READERS(double)
SKINNY_MATRIX_IO_WRITERS(float)
SKINNY_MATRIX_IO_WRITERS(double)
SKINNY_MATRIX_IO_WRITERS(std::int32_t)

}  // namespace skinny::apps
