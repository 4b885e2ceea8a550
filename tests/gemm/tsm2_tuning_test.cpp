// Tsm2Tuning read from named settings (the programs' SKINNY_TSM2_* environment): each name sets its
// field, unset names keep the library's defaults, and a bad value is refused naming the setting.
#include <skinny/gemm/tsm2_tuning.hpp>

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

namespace skinny::gemm {
namespace {

Tsm2Tuning read(const std::map<std::string, std::string>& settings) {
  return tsm2_tuning_from([&](const char* name) -> const char* {
    const auto it = settings.find(name);
    return it == settings.end() ? nullptr : it->second.c_str();
  });
}

std::string refusal(const std::map<std::string, std::string>& settings) {
  try {
    read(settings);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Tsm2Tuning, NothingSetKeepsTheDefaults) {
  const Tsm2Tuning t = read({});
  EXPECT_TRUE(t.trial);
  EXPECT_EQ(t.t1, 0);
  EXPECT_EQ(t.split, 0);
  EXPECT_EQ(t.max_t2, 0);
  EXPECT_EQ(t.partial_cap, 0);
  EXPECT_EQ(t.row_major_kernel, Tsm2RowMajorKernel::any);
  EXPECT_EQ(t.col_major_kernel, Tsm2ColMajorKernel::any);
  EXPECT_EQ(t.split_rule, Tsm2SplitRule::all);
  EXPECT_FALSE(t.verbose);
  EXPECT_EQ(t.key(), Tsm2Tuning{}.key());
  EXPECT_EQ(read({{"SKINNY_TSM2_T1", ""}}).t1, 0);  // empty counts as unset
}

TEST(Tsm2Tuning, EachSettingSetsItsField) {
  const Tsm2Tuning t = read({{"SKINNY_TSM2_NO_TRIAL", "1"}, {"SKINNY_TSM2_T1", "512"}, {"SKINNY_TSM2_SPLIT", "6"},
                             {"SKINNY_TSM2_MAX_T2", "8"}, {"SKINNY_TSM2_PARTIAL_CAP", "0.05"},
                             {"SKINNY_TSM2_RM_KERNEL", "stream"}, {"SKINNY_TSM2_CM_KERNEL", "tf32"},
                             {"SKINNY_TSM2_SPLIT_RULE", "lean"}, {"SKINNY_TSM2_VERBOSE", "1"}});
  EXPECT_FALSE(t.trial);
  EXPECT_EQ(t.t1, 512);
  EXPECT_EQ(t.split, 6);
  EXPECT_EQ(t.max_t2, 8);
  EXPECT_DOUBLE_EQ(t.partial_cap, 0.05);
  EXPECT_EQ(t.row_major_kernel, Tsm2RowMajorKernel::stream);
  EXPECT_EQ(t.col_major_kernel, Tsm2ColMajorKernel::tf32);
  EXPECT_EQ(t.split_rule, Tsm2SplitRule::lean);
  EXPECT_TRUE(t.verbose);
  EXPECT_TRUE(read({{"SKINNY_TSM2_NO_TRIAL", "0"}}).trial);
  EXPECT_EQ(read({{"SKINNY_TSM2_RM_KERNEL", "mma"}}).row_major_kernel, Tsm2RowMajorKernel::mma);
  EXPECT_EQ(read({{"SKINNY_TSM2_RM_KERNEL", "ffma"}}).row_major_kernel, Tsm2RowMajorKernel::ffma);
  EXPECT_EQ(read({{"SKINNY_TSM2_CM_KERNEL", "dmma"}}).col_major_kernel, Tsm2ColMajorKernel::dmma);
  EXPECT_EQ(read({{"SKINNY_TSM2_CM_KERNEL", "ffma"}}).col_major_kernel, Tsm2ColMajorKernel::ffma);
}

TEST(Tsm2Tuning, PlansAreKeyedByEveryFieldThatChangesThem) {
  const std::string plain = Tsm2Tuning{}.key();
  EXPECT_NE(read({{"SKINNY_TSM2_NO_TRIAL", "1"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_T1", "128"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_SPLIT", "2"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_MAX_T2", "4"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_PARTIAL_CAP", "0.1"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_RM_KERNEL", "mma"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_CM_KERNEL", "dmma"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_SPLIT_RULE", "lean"}}).key(), plain);
  EXPECT_NE(read({{"SKINNY_TSM2_RM_KERNEL", "mma"}}).key(), read({{"SKINNY_TSM2_CM_KERNEL", "dmma"}}).key());
  EXPECT_EQ(read({{"SKINNY_TSM2_VERBOSE", "1"}}).key(), plain);  // printing plans changes none
}

TEST(Tsm2Tuning, BadValuesAreRefusedNamingTheSetting) {
  EXPECT_EQ(refusal({{"SKINNY_TSM2_CM_KERNEL", "wgmma"}}),
            "SKINNY_TSM2_CM_KERNEL=wgmma is not valid: expected dmma, tf32 or ffma");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_RM_KERNEL", "tf32"}}),
            "SKINNY_TSM2_RM_KERNEL=tf32 is not valid: expected mma, ffma or stream");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_T1", "-64"}}), "SKINNY_TSM2_T1=-64 is not valid: expected a whole number >= 0");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_SPLIT", "4x"}}), "SKINNY_TSM2_SPLIT=4x is not valid: expected a whole number >= 0");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_PARTIAL_CAP", "2"}}),
            "SKINNY_TSM2_PARTIAL_CAP=2 is not valid: expected a number in [0, 1]");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_PARTIAL_CAP", "nan"}}),
            "SKINNY_TSM2_PARTIAL_CAP=nan is not valid: expected a number in [0, 1]");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_NO_TRIAL", "yes"}}), "SKINNY_TSM2_NO_TRIAL=yes is not valid: expected 0 or 1");
  EXPECT_EQ(refusal({{"SKINNY_TSM2_SPLIT_RULE", "stream-k"}}),
            "SKINNY_TSM2_SPLIT_RULE=stream-k is not valid: expected all or lean");
}

}  // namespace
}  // namespace skinny::gemm
