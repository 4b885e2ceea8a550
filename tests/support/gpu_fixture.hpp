// Base fixture of every GPU test: skips, saying why, when there is no CUDA device.
#pragma once

#include <skinny/gemm/context.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

namespace skinny::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

/// One Context (and cuBLAS handle) for the whole test binary: creating a handle per test costs more
/// than most of the GEMMs the tests run. Its TSM2 tuning comes from SKINNY_TSM2_* (ctest runs the
/// TSM2 cases again with one kernel forced that way, tests/gemm/CMakeLists.txt).
inline Context& shared_context() {
  static Context ctx;
  static const bool tuned = (ctx.set_tsm2_tuning(gemm::tsm2_tuning_from(std::getenv)), true);
  (void)tuned;
  return ctx;
}

template <class Param>
class GpuTestWithParam : public GpuTest, public ::testing::WithParamInterface<Param> {};

}  // namespace skinny::testing
