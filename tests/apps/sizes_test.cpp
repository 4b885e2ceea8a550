// parse_size: the sizes --max-gpu-memory takes, and the messages for what it refuses.
#include "common/sizes.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace skinny::apps {
namespace {

std::string refusal(const std::string& text) {
  try {
    parse_size(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ParseSize, BytesAndPowersOf1024) {
  EXPECT_EQ(parse_size("1048576"), 1048576u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("2g"), 2ull << 30);
  EXPECT_EQ(parse_size("2GB"), 2ull << 30);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size(".5K"), 512u);
  EXPECT_EQ(parse_size("1.0001"), 1u) << "rounded down to whole bytes";
  EXPECT_EQ(parse_size("18446744073709551615"), 18446744073709551615ull);
}

TEST(ParseSize, RefusesWhatIsNotASizeSayingWhy) {
  for (const char* text : {"", "G", "2X", "2 G", "-1G", "1e9", "2GG", "2Gi", "0x10", "1.5.5G", " 2G"})
    EXPECT_NE(refusal(text).find("is not a size: expected bytes with an optional suffix K, M, G or T"), std::string::npos)
        << "'" << text << "': " << refusal(text);
  EXPECT_EQ(refusal("2X"), "'2X' is not a size: expected bytes with an optional suffix K, M, G or T (powers of 1024), "
                           "e.g. 512M or 2G");
  EXPECT_NE(refusal("0").find("'0' is less than one byte"), std::string::npos);
  EXPECT_NE(refusal("0.4").find("less than one byte"), std::string::npos);
  EXPECT_NE(refusal("16777216T").find("more than 2^64 - 1 bytes"), std::string::npos);
  EXPECT_NE(refusal("18446744073709551616").find("more than 2^64 - 1 bytes"), std::string::npos);
}

}  // namespace
}  // namespace skinny::apps
