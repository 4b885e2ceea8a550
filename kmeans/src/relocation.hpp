// Empty clusters across ranks: which points they take. scikit-learn's rule (_relocate_empty_clusters):
// the points farthest from their centroids, the largest distance first, ties to the lower index. Each
// rank proposes its own farthest points (as many as there are empty clusters), all proposals are
// gathered, and every rank picks the same global ones from them: the global farthest m are among the
// union of each rank's farthest m. Host code (the CPU tests check it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace skinny::kmeans::detail {

/// A point offered to an empty cluster; trivially copyable (it crosses ranks as bytes).
struct RelocationCandidate {
  double distance = -1;       ///< squared distance to its centroid (the assignment's, as a double)
  std::int64_t index = -1;    ///< global row index; < 0: padding (a rank with fewer points than asked)
  std::int32_t label = -1;    ///< its cluster before the move
  std::int32_t rank = -1;     ///< the rank that holds its row
  double weight = 1;          ///< its sample weight
};

/// scikit-learn's order: larger distance first, then lower index.
inline bool farther(const RelocationCandidate& a, const RelocationCandidate& b) {
  return a.distance > b.distance || (a.distance == b.distance && a.index < b.index);
}

/// The m farthest real candidates (index >= 0) in that order (fewer when fewer are real).
inline std::vector<RelocationCandidate> farthest(std::vector<RelocationCandidate> candidates, std::size_t m) {
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [](const RelocationCandidate& c) { return c.index < 0; }),
                   candidates.end());
  const std::size_t keep = std::min(m, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(), farther);
  candidates.resize(keep);
  return candidates;
}

/// `candidates` padded with padding entries to exactly m (what each rank sends to the allgather).
inline std::vector<RelocationCandidate> padded(std::vector<RelocationCandidate> candidates, std::size_t m) {
  candidates.resize(m);
  return candidates;
}

}  // namespace skinny::kmeans::detail
