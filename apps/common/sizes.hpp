// Sizes in bytes as people write them on a command line: 2G, 512M, 1.5G, 1048576.
#pragma once

#include <cstdint>
#include <string>

namespace skinny::apps {

/// A number of bytes with an optional suffix K, M, G or T (powers of 1024; either case, optionally
/// followed by B or iB: 2G, 2GiB, 512m, 1.5G), rounded down to whole bytes. Throws std::invalid_argument
/// saying what is wrong with the text: not a size, zero, or more than 2^64 - 1 bytes.
std::uint64_t parse_size(const std::string& text);

}  // namespace skinny::apps
