// The file readers and writers the programs use: round trips through .npy and CSV, and every kind of
// malformed input refused with a message that says what and where.
#include "common/matrix_io.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace skinny::apps {
namespace {

template <class T>
HostData<T> npy_from(const std::string& bytes) {
  std::istringstream in(bytes);
  return read_npy<T>(in, "x.npy");
}
template <class T>
HostData<T> csv_from(const std::string& text) {
  std::istringstream in(text);
  return read_csv<T>(in, "x.csv");
}

/// The message of the runtime_error `f` throws ("" when it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(MatrixIo, NpyRoundTripKeepsShapeAndValuesAndConvertsTypes) {
  const float values[6] = {1.5f, -2.25f, 3e-7f, 4e20f, -0.0f, 6};
  const std::string bytes = npy_bytes(values, 2, 3);
  ASSERT_EQ(0u, (bytes.size() - 6 * sizeof(float)) % 64) << "header padded to a multiple of 64 bytes";
  const auto f = npy_from<float>(bytes);
  EXPECT_EQ(2, f.rows);
  EXPECT_EQ(3, f.cols);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], f.values[i]) << i;
  const auto d = npy_from<double>(bytes);  // float32 file read as double: exact widening
  for (int i = 0; i < 6; ++i) EXPECT_EQ(double(values[i]), d.values[i]) << i;
}

TEST(MatrixIo, NpyReadsVersion2HeadersAndFloat64) {
  const double values[2] = {0.1, -7};
  std::string v1 = npy_bytes(values, 2, 1);
  // Rewrite as version 2.0: a 4-byte header length.
  const std::uint16_t len = std::uint16_t(std::uint8_t(v1[8]) | std::uint8_t(v1[9]) << 8);
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string(1, char(len & 0xff)) + std::string(1, char(len >> 8)) +
                   std::string(2, '\0') + v1.substr(10);
  const auto m = npy_from<double>(v2);
  EXPECT_EQ(2, m.rows);
  EXPECT_EQ(0.1, m.values[0]);
  EXPECT_EQ(-7, m.values[1]);
}

TEST(MatrixIo, NpyRefusesMalformedFilesSayingWhy) {
  const float v[4] = {1, 2, 3, 4};
  const std::string good = npy_bytes(v, 2, 2);
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>("PK\x03\x04 not numpy"); }).find("bad magic"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(good.substr(0, good.size() - 3)); }).find("truncated"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(good + "xx"); }).find("bytes of data follow"));
  auto with_header = [&](std::string from, std::string to) {
    std::string b = good;
    b.replace(b.find(from), from.size(), to);
    return b;
  };
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(with_header("<f4", "<i4")); }).find("'<i4' is not supported"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(with_header("<f4", ">f4")); }).find("not supported"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(with_header("False", "True ")); }).find("Fortran order"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(with_header("(2, 2)", "(1,2,2)")); }).find("2-D"));
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(with_header("(2, 2)", "(0, 2)")); }).find("empty matrix"));
  EXPECT_NE(std::string::npos,
            error_of([&] { npy_from<float>(with_header("'shape'", "'shapo'")); }).find("no 'shape' entry"));
}

TEST(MatrixIo, Float16NpyIsReadExactly) {
  // float16 bits of 1, -2, 0.5, 65504 (largest), 2^-24 (smallest subnormal), 0 laid out as 2 x 3.
  const std::uint16_t bits[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x0000};
  const float v[6] = {0, 0, 0, 0, 0, 0};
  std::string b = npy_bytes(v, 2, 3);
  b.replace(b.find("<f4"), 3, "<f2");
  b.resize(b.size() - sizeof v);
  b.append(reinterpret_cast<const char*>(bits), sizeof bits);
  const auto m = npy_from<float>(b);
  ASSERT_EQ(2, m.rows);
  EXPECT_EQ((std::vector<float>{1, -2, 0.5f, 65504, std::ldexp(1.0f, -24), 0}), m.values);
  const std::uint16_t nan_bits[6] = {0x3c00, 0x7e00, 0, 0, 0, 0};
  b.replace(b.size() - sizeof bits, sizeof bits, reinterpret_cast<const char*>(nan_bits), sizeof nan_bits);
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(b); }).find("non-finite value (nan) at row 0, column 1"));
}

TEST(MatrixIo, OneDimensionalNpyIsAColumn) {
  const double v[3] = {0.5, 2, 7};
  std::string b = npy_bytes(v, 3, 1);
  b.replace(b.find("(3, 1)"), 6, "(3,)  ");
  const auto m = npy_from<double>(b);
  EXPECT_EQ(3, m.rows);
  EXPECT_EQ(1, m.cols);
  EXPECT_EQ(7, m.values[2]);
}

TEST(MatrixIo, NpyRefusesNaNAndInfNamingTheElement) {
  const float v[4] = {1, 2, NAN, 4};
  const std::string msg = error_of([&] { npy_from<float>(npy_bytes(v, 2, 2)); });
  EXPECT_NE(std::string::npos, msg.find("non-finite value (nan) at row 1, column 0")) << msg;
  const double big[1] = {1e300};  // finite in double, +inf once narrowed to float
  EXPECT_NE(std::string::npos, error_of([&] { npy_from<float>(npy_bytes(big, 1, 1)); }).find("(inf)"));
  EXPECT_EQ("", error_of([&] { npy_from<double>(npy_bytes(big, 1, 1)); }));
}

TEST(MatrixIo, CsvWithAndWithoutHeader) {
  const auto plain = csv_from<double>("1,2,3\n4, 5 ,6e-1\r\n\n");
  EXPECT_EQ(2, plain.rows);
  EXPECT_EQ(3, plain.cols);
  EXPECT_EQ(0.6, plain.values[5]);
  const auto named = csv_from<float>("x,y\n1.5,-2\n3,4\n");
  EXPECT_EQ(2, named.rows);
  EXPECT_EQ(2, named.cols);
  EXPECT_EQ(1.5f, named.values[0]);
}

TEST(MatrixIo, CsvRefusesMalformedTextSayingWhere) {
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>("1,2\n3\n"); }).find("line 2 has 1 fields, expected 2"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>("1,2\n3,abc\n"); }).find("line 2, column 2: 'abc'"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>("1,2,3\n1,,2\n"); }).find("line 2, column 2"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>("a,b\n"); }).find("no data rows"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>(""); }).find("no data rows"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<float>("1,nan\n"); }).find("non-finite value (nan) at row 0, column 1"));
  EXPECT_NE(std::string::npos, error_of([&] { csv_from<double>("1e999\n"); }).find("(inf)"));
}

TEST(MatrixIo, CsvTextRoundTripsExactly) {
  const double v[3] = {0.1, -1.0 / 3, 12345.678};
  const auto m = csv_from<double>(csv_text(v, 3, 1));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(v[i], m.values[i]);
  const std::int32_t labels[3] = {0, 15, 7};
  EXPECT_EQ("0\n15\n7\n", csv_text(labels, 3, 1));
}

TEST(MatrixIo, RawNeedsWholeRows) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const std::string bytes(reinterpret_cast<const char*>(v), sizeof v);
  std::istringstream in(bytes);
  const auto m = read_raw<double>(in, "x.bin", 3, RawType::f32);
  EXPECT_EQ(2, m.rows);
  EXPECT_EQ(6.0, m.values[5]);
  std::istringstream in4(bytes);
  EXPECT_NE(std::string::npos, error_of([&] { read_raw<float>(in4, "x.bin", 4, RawType::f32); }).find("whole number of rows"));
  std::istringstream in0(bytes);
  EXPECT_NE(std::string::npos, error_of([&] { read_raw<float>(in0, "x.bin", 0, RawType::f32); }).find("--d"));
}

TEST(MatrixIo, FormatsFromExtensionsAndAtomicWrites) {
  EXPECT_EQ(FileFormat::npy, format_from_path("a/b.NPY"));
  EXPECT_EQ(FileFormat::csv, format_from_path("data.csv"));
  EXPECT_EQ(FileFormat::raw, format_from_path("dir.v2/data"));
  EXPECT_THROW(check_output_format("labels.bin"), std::runtime_error);
  const std::string path = ::testing::TempDir() + "skinny_matrix_io_test.npy";
  const float v[2] = {3, 4};
  write_matrix(path, v, 1, 2);
  const auto m = read_matrix<float>(path);
  EXPECT_EQ(2, m.cols);
  EXPECT_EQ(4.0f, m.values[1]);
  std::remove(path.c_str());
  EXPECT_NE(std::string::npos, error_of([&] { read_matrix<float>("/nonexistent/x.npy"); }).find("cannot open"));
  EXPECT_THROW(write_matrix("/nonexistent-dir/x.npy", v, 1, 2), std::runtime_error);
}

/// One MPI rank's rows: a .npy (float64, converted), a CSV and a raw file give the same rows as the whole
/// file does, and the shape comes from the header alone.
TEST(MatrixIo, RowRangesOfEveryFormatAreThoseRowsOfTheWholeFile) {
  const std::int64_t rows = 11, cols = 3;
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * double(i) - 3;
  const std::string base = ::testing::TempDir() + "skinny_matrix_rows_test";
  write_matrix(base + ".npy", v.data(), rows, cols);
  write_matrix(base + ".csv", v.data(), rows, cols);
  {
    std::ofstream raw(base + ".bin", std::ios::binary);
    raw.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  }
  ReadOptions ro;
  ro.raw_cols = cols;
  ro.raw_type = RawType::f64;
  for (const std::string ext : {".npy", ".csv", ".bin"}) {
    const std::string path = base + ext;
    const MatrixShape shape = read_matrix_shape(path, ro);
    EXPECT_EQ(shape.rows, rows) << ext;
    EXPECT_EQ(shape.cols, cols) << ext;
    for (const auto& [begin, count] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {4, 4}, {8, 3}, {10, 1}}) {
      const HostData<float> part = read_matrix_rows<float>(path, ro, begin, count);
      ASSERT_EQ(part.rows, count) << ext;
      ASSERT_EQ(part.cols, cols) << ext;
      for (std::int64_t i = 0; i < count * cols; ++i)
        EXPECT_EQ(part.values[static_cast<std::size_t>(i)], float(v[static_cast<std::size_t>(begin * cols + i)])) << ext;
    }
    EXPECT_NE(std::string::npos, error_of([&] { read_matrix_rows<float>(path, ro, 9, 3); }).find("outside its 11 rows"))
        << ext;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace skinny::apps
