// main() for GPU test binaries: every test's fixture skips with the reason when no CUDA device is
// present; then the process exits with 77, which CTest reports as "Skipped", never as a pass.
#include <skinny/gemm/context.hpp>

#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  if (skinny::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device on this machine; GPU tests need an NVIDIA GPU and driver\n");
    return 77;
  }
  return result;
}
