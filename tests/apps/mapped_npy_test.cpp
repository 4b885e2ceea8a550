// MappedNpy: a .npy file written here, mapped in place with read_npy's checks of its header and size.
#include "common/mapped_npy.hpp"
#include "common/matrix_io.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace skinny::apps {
namespace {

/// A file in the temporary directory holding `bytes`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    path_ = (::testing::TempDir().empty() ? std::string("/tmp/") : ::testing::TempDir()) + "mapped_npy_" +
            std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".npy";
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string error_of(const std::string& path) {
  try {
    MappedNpy m(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(MappedNpy, MapsTheValuesInPlace) {
  const float values[6] = {1.5f, -2.25f, 3e-7f, 4e20f, -0.0f, 6};
  const TempFile f(npy_bytes(values, 3, 2));
  const MappedNpy m(f.path());
  EXPECT_EQ(m.rows(), 3);
  EXPECT_EQ(m.cols(), 2);
  EXPECT_EQ(m.elem_bytes(), 4);
  EXPECT_EQ(m.data_bytes(), 24);
  const float* v = m.values<float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], values[i]) << i;
  try {
    m.values<double>();
    FAIL() << "float32 read as float64";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds float32 values, not float64"), std::string::npos) << e.what();
  }
}

TEST(MappedNpy, MovesKeepTheMapping) {
  const double values[2] = {0.1, -7};
  const TempFile f(npy_bytes(values, 2, 1));
  MappedNpy a(f.path());
  MappedNpy b(std::move(a));
  EXPECT_EQ(b.values<double>()[1], -7);
  EXPECT_EQ(b.path(), f.path());
}

TEST(MappedNpy, RefusesWhatReadNpyRefuses) {
  const float v[4] = {1, 2, 3, 4};
  const std::string good = npy_bytes(v, 2, 2);
  auto with_header = [&](std::string from, std::string to) {
    std::string b = good;
    b.replace(b.find(from), from.size(), to);
    return b;
  };
  EXPECT_NE(error_of(TempFile("PK\x03\x04 not numpy").path()).find("not a .npy file (bad magic bytes)"), std::string::npos);
  EXPECT_NE(error_of(TempFile(with_header("<f4", "<i4")).path()).find("'<i4' is not supported"), std::string::npos);
  EXPECT_NE(error_of(TempFile(with_header("False", "True ")).path()).find("Fortran order"), std::string::npos);
  EXPECT_NE(error_of(TempFile(with_header("(2, 2)", "(1,2,2)")).path()).find("2-D"), std::string::npos);
  EXPECT_NE(error_of(TempFile(good.substr(0, 9)).path()).find("truncated .npy header"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/x.npy").find("/nonexistent/x.npy: cannot open"), std::string::npos);
}

TEST(MappedNpy, RefusesATruncatedFileNamingTheSizes) {
  const float v[4] = {1, 2, 3, 4};
  const std::string good = npy_bytes(v, 2, 2);
  const TempFile truncated(good.substr(0, good.size() - 3));
  const std::string what = error_of(truncated.path());
  EXPECT_EQ(what.find(truncated.path() + ": header says 2 x 2 float32 (16 bytes) but 13 bytes of data follow (truncated file)"),
            0u)
      << what;
  const TempFile longer(good + "xx");
  EXPECT_NE(error_of(longer.path()).find("but 18 bytes of data follow"), std::string::npos);
}

TEST(MappedNpy, NaNIsLeftToTheCaller) {
  const float v[4] = {1, 2, NAN, 4};
  const TempFile f(npy_bytes(v, 2, 2));
  const MappedNpy m(f.path());  // mapping does not read the values
  try {
    require_finite(m.values<float>(), m.rows(), m.cols(), f.path());
    FAIL() << "NaN passed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite value (nan) at row 1, column 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace skinny::apps
