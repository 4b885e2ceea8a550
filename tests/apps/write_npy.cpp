// Test helper: writes n x d float32 blobs (host_blobs, make_blobs' generator) to a .npy file, optionally
// with a NaN at one element, for the kmeans program's tests on real files.
//   write-npy OUT.npy N D K SEED [NAN_ROW NAN_COL]
#include "common/host_blobs.hpp"
#include "common/matrix_io.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6 && argc != 8) {
    std::fprintf(stderr, "usage: write-npy OUT.npy N D K SEED [NAN_ROW NAN_COL]\n");
    return 2;
  }
  try {
    const std::int64_t n = std::stoll(argv[2]), d = std::stoll(argv[3]);
    const int k = std::stoi(argv[4]);
    const std::uint64_t seed = std::stoull(argv[5]);
    std::vector<float> x(static_cast<std::size_t>(n * d));
    skinny::apps::host_blobs<float>(x.data(), 0, n, d, k, seed, 4);
    if (argc == 8) x[static_cast<std::size_t>(std::stoll(argv[6]) * d + std::stoll(argv[7]))] = NAN;
    skinny::apps::write_matrix(argv[1], x.data(), n, d);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write-npy: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
