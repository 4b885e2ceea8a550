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

template <class Param>
class GpuTestWithParam : public GpuTest, public ::testing::WithParamInterface<Param> {};

}  // namespace skinny::testing
