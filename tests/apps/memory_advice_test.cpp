// The advice a program gives for a problem too large for the GPU suggests only what would help.
#include "common/app_main.hpp"

#include <gtest/gtest.h>

namespace skinny::apps {
namespace {

TEST(MemoryAdvice, SuggestsFloatOnlyForADoubleRun) {
  CommonOptions o;
  o.precision = "float";
  EXPECT_EQ(memory_advice(o, "a smaller --n or --d"), "; use a smaller --n or --d");
  o.precision = "double";
  EXPECT_EQ(memory_advice(o, "a smaller --size"), "; use --precision float (half the memory) or a smaller --size");
}

}  // namespace
}  // namespace skinny::apps
