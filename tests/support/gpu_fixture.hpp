// Base fixture of every GPU test: skips, saying why, when there is no CUDA device.
#pragma once

#include <skinny/gemm/context.hpp>

#include <gtest/gtest.h>

namespace skinny::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

/// One Context (and cuBLAS handle) for the whole test binary: creating a handle per test costs more
/// than most of the GEMMs the tests run.
inline Context& shared_context() {
  static Context ctx;
  return ctx;
}

template <class Param>
class GpuTestWithParam : public GpuTest, public ::testing::WithParamInterface<Param> {};

}  // namespace skinny::testing
