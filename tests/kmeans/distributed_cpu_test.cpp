// Multi-GPU K-means pieces that need no GPU: the sharding of rows over ranks, the choice of the points
// that empty clusters take from the ranks' gathered proposals, the initialisation's sample, and the
// communicators' collectives on host memory (LocalCommunicator; ThreadCommunicator's ranks as threads).
#include <skinny/kmeans/communicator.hpp>
#include <skinny/kmeans/distributed.hpp>
#include <skinny/kmeans/thread_communicator.hpp>

#include "../../kmeans/src/relocation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

namespace skinny::kmeans {
namespace {

TEST(ShardRows, CoverAllRowsInRankOrderWithinOneRowOfEachOther) {
  for (std::int64_t n : {1, 2, 7, 8, 9, 1000, 1001, 1023, 16777216})
    for (int ranks : {1, 2, 3, 4, 7, 8}) {
      if (n < ranks) continue;
      std::int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < ranks; ++r) {
        const RowRange s = shard_rows(n, ranks, r);
        EXPECT_EQ(s.begin, next) << "n=" << n << " ranks=" << ranks << " rank=" << r;
        EXPECT_GE(s.count, 1);
        next += s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
        if (r > 0) EXPECT_LE(s.count, shard_rows(n, ranks, r - 1).count) << "the first ranks take the extra rows";
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1);
    }
}

TEST(ShardRows, RefusesMoreRanksThanRowsAndBadRanks) {
  EXPECT_THROW(shard_rows(3, 4, 0), std::invalid_argument);
  EXPECT_THROW(shard_rows(10, 0, 0), std::invalid_argument);
  EXPECT_THROW(shard_rows(10, 2, 2), std::invalid_argument);
  EXPECT_THROW(shard_rows(10, 2, -1), std::invalid_argument);
}

using detail::RelocationCandidate;

/// The rank whose shard_rows range holds row i.
int shard_rank(std::int64_t n, int ranks, std::int64_t i) {
  for (int r = 0; r < ranks; ++r) {
    const RowRange s = shard_rows(n, ranks, r);
    if (i >= s.begin && i < s.begin + s.count) return r;
  }
  return -1;
}

/// Points of random distances (many ties) spread over `ranks` shards: each rank's own farthest m, padded,
/// gathered, then farthest again gives the same points, in the same order, as farthest of all points.
TEST(Relocation, GatheredProposalsPickTheGlobalFarthestWithTiesToTheLowerIndex) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 60);
    const int ranks = 1 + static_cast<int>(rng() % std::min<std::int64_t>(n, 8));
    const std::size_t m = 1 + rng() % 6;
    std::vector<RelocationCandidate> all;
    for (std::int64_t i = 0; i < n; ++i)
      all.push_back({double(rng() % 5), i, static_cast<std::int32_t>(rng() % 3), -1, 1.0 + double(rng() % 3)});
    std::vector<RelocationCandidate> gathered;
    for (int r = 0; r < ranks; ++r) {
      const RowRange s = shard_rows(n, ranks, r);
      std::vector<RelocationCandidate> mine(all.begin() + s.begin, all.begin() + s.begin + s.count);
      for (auto& c : mine) c.rank = r;
      const auto proposed = detail::padded(detail::farthest(mine, m), m);
      ASSERT_EQ(proposed.size(), m);
      gathered.insert(gathered.end(), proposed.begin(), proposed.end());
    }
    const auto chosen = detail::farthest(gathered, m);
    const auto expected = detail::farthest(all, m);
    ASSERT_EQ(chosen.size(), expected.size());
    ASSERT_EQ(chosen.size(), std::min<std::size_t>(m, static_cast<std::size_t>(n)));
    for (std::size_t e = 0; e < chosen.size(); ++e) {
      EXPECT_EQ(chosen[e].index, expected[e].index) << "trial " << trial;
      EXPECT_EQ(chosen[e].label, expected[e].label);
      EXPECT_EQ(chosen[e].weight, expected[e].weight);
      EXPECT_EQ(chosen[e].rank, shard_rank(n, ranks, chosen[e].index));
    }
  }
}

TEST(Relocation, OrderIsLargestDistanceFirstThenLowerIndex) {
  const std::vector<RelocationCandidate> c = {{2.0, 7, 0, 0, 1}, {3.0, 9, 1, 0, 1}, {2.0, 3, 2, 1, 1}, {3.0, 4, 0, 1, 1},
                                              {-1, -1, -1, -1, 1}};
  const auto f = detail::farthest(c, 10);
  ASSERT_EQ(f.size(), 4u) << "padding is never chosen";
  EXPECT_EQ(f[0].index, 4);
  EXPECT_EQ(f[1].index, 9);
  EXPECT_EQ(f[2].index, 3);
  EXPECT_EQ(f[3].index, 7);
}

TEST(InitSample, AllRowsWhenTheyFitOtherwiseSortedDistinctRowsFromTheSeed) {
  EXPECT_EQ(init_sample_rows(1000, 16, 8, 4), 1000);
  const std::vector<std::int64_t> all = init_sample(1000, 16, 8, 4, 3);
  ASSERT_EQ(all.size(), 1000u);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], std::int64_t(i));
  // 2^24 x 1024 float (64 GiB): a sample of kInitSampleMaxBytes.
  const std::int64_t n = std::int64_t(1) << 24, d = 1024;
  const std::int64_t s = init_sample_rows(n, d, 1024, 4);
  EXPECT_EQ(s, kInitSampleMaxBytes / (d * 4));
  const std::vector<std::int64_t> a = init_sample(n, d, 1024, 4, 7), b = init_sample(n, d, 1024, 4, 7);
  EXPECT_EQ(a, b) << "a pure function of the seed";
  ASSERT_EQ(static_cast<std::int64_t>(a.size()), s);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_TRUE(std::adjacent_find(a.begin(), a.end()) == a.end()) << "distinct rows";
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), n);
  EXPECT_NE(a, init_sample(n, d, 1024, 4, 8)) << "another seed, another sample";
  // Many clusters of many dimensions: at least kInitSampleMinRowsPerCluster rows per cluster.
  EXPECT_EQ(init_sample_rows(n, 4096, 100000, 4), kInitSampleMinRowsPerCluster * 100000);
}

TEST(LocalCommunicator, OneRankLeavesTheDataAsItIs) {
  LocalCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<std::uint64_t> u = {1, 2, 3};
  std::vector<std::int32_t> i = {-4, 5};
  std::vector<double> f = {0.5, -0.0};
  comm.group_begin();
  comm.allreduce_sum(u.data(), u.size(), nullptr);
  comm.allreduce_sum(i.data(), i.size(), nullptr);
  comm.allreduce_sum(f.data(), f.size(), nullptr);
  comm.allreduce_max(u.data(), u.size(), nullptr);
  comm.broadcast(u.data(), sizeof(std::uint64_t) * u.size(), 0, nullptr);
  comm.group_end();
  EXPECT_EQ(u, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(i, (std::vector<std::int32_t>{-4, 5}));
  EXPECT_TRUE(std::signbit(f[1]));
  std::vector<std::uint64_t> gathered(3);
  comm.allgather(u.data(), gathered.data(), sizeof(std::uint64_t) * u.size(), nullptr);
  EXPECT_EQ(gathered, u);
}

/// Host memory through ThreadCommunicator: each collective's result on every rank.
TEST(ThreadCommunicator, CollectivesOfThreadRanksOnHostMemory) {
  for (int ranks : {1, 2, 3, 5}) {
    ThreadGroup group(ranks);
    std::vector<std::vector<std::uint64_t>> sums(ranks), maxima(ranks), gathered(ranks), bcast(ranks);
    std::vector<std::vector<std::int32_t>> ints(ranks);
    run_ranks(ranks, [&](int r) {
      ThreadCommunicator comm(group, r);
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), ranks);
      sums[r] = {std::uint64_t(r), ~std::uint64_t(0)};  // the second wraps: integer sums are modulo 2^64
      comm.allreduce_sum(sums[r].data(), 2, nullptr);
      maxima[r] = {std::uint64_t(10 * r), std::uint64_t(100 - r)};
      comm.allreduce_max(maxima[r].data(), 2, nullptr);
      ints[r] = {r - 2};
      comm.allreduce_sum(ints[r].data(), 1, nullptr);
      std::uint64_t mine = 7 + std::uint64_t(r);
      gathered[r].assign(ranks, 0);
      comm.allgather(&mine, gathered[r].data(), sizeof mine, nullptr);
      bcast[r] = {std::uint64_t(r == ranks - 1 ? 42 : 0)};
      comm.broadcast(bcast[r].data(), sizeof(std::uint64_t), ranks - 1, nullptr);
    });
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(sums[r][0], std::uint64_t(ranks * (ranks - 1) / 2));
      EXPECT_EQ(sums[r][1], std::uint64_t(0) - std::uint64_t(ranks));
      EXPECT_EQ(maxima[r][0], std::uint64_t(10 * (ranks - 1)));
      EXPECT_EQ(maxima[r][1], 100u);
      EXPECT_EQ(ints[r][0], ranks * (ranks - 1) / 2 - 2 * ranks);
      for (int q = 0; q < ranks; ++q) EXPECT_EQ(gathered[r][q], 7u + std::uint64_t(q));
      EXPECT_EQ(bcast[r][0], 42u);
    }
  }
}

TEST(ThreadCommunicator, AFailedRankStopsTheOthersInsteadOfLeavingThemWaiting) {
  ThreadGroup group(3);
  try {
    run_ranks(
        3,
        [&](int r) {
          ThreadCommunicator comm(group, r);
          if (r == 1) throw std::invalid_argument("rank 1 refuses");
          std::uint64_t v = 1;
          comm.allreduce_sum(&v, 1, nullptr);  // would wait for rank 1 forever
        },
        [&] { group.abort(); });
    FAIL() << "run_ranks should rethrow rank 1's exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "rank 1 refuses");
  }
}

}  // namespace
}  // namespace skinny::kmeans
