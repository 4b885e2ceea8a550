// Gaussian blobs in host memory, for streamed k-means on synthetic data larger than the GPU: make_blobs'
// generator (kmeans/src/blobs.cu) evaluated on the host, each value a pure function of (seed, index).
#pragma once

#include <cstdint>
#include <vector>

namespace skinny::apps {

/// Rows [row0, row0 + rows) of the n x d blobs make_blobs generates for (k, seed, stddev, center_box)
/// into x (rows x d, row-major), shared out over `threads` host threads: point i in blob i % k, centres
/// uniform in [-center_box, center_box]^d, each coordinate N(centre, stddev^2) by Box-Muller over the
/// same counter-based stream. The centres are make_blobs' bit for bit; a point may differ from the GPU's
/// in its last bit (the host's log and cos against the GPU's log and cospi). Returns the centres (k x d).
template <class T>
std::vector<T> host_blobs(T* x, std::int64_t row0, std::int64_t rows, std::int64_t d, int k, std::uint64_t seed,
                          int threads, double stddev = 1.0, double center_box = 10.0);

}  // namespace skinny::apps
