// Shared-memory layouts of the column-major tensor-core TSM2 kernel (gemm/src/tsm2/cm_mma_kernel.cuh),
// checked on the CPU for every instantiated configuration:
//  * the copies of a stage keep each 16-byte piece in its aligned 128-byte line (on the H100, copies
//    that straddled lines were split into partial L2 requests that fetched half the sectors twice),
//    together fill the stage, and a warp's copy instruction reads 512 contiguous bytes of a column;
//  * each lane's fragment reads find the rows and inner indices the mma instruction expects of it;
//  * no wavefront of those reads (a quarter warp for 16-byte, a half warp for 8-byte accesses) puts two
//    different addresses in one bank.
// The GPU tests check the products; these pin down the layout properties that the speed depends on.
#include "../../gemm/src/tsm2/cm_mma_kernel.cuh"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {

using namespace skinny::gemm::detail::tsm2_device;

/// True when no two of the accesses (byte offsets, `bytes` wide each, one wavefront) at different
/// addresses touch the same one of the 32 four-byte banks.
bool conflict_free(const std::vector<int>& offsets, int bytes) {
  std::vector<int> owner(32, -1);
  for (int off : offsets)
    for (int w = 0; w < bytes / 4; ++w) {
      const int bank = (off / 4 + w) % 32;
      if (owner[bank] != -1 && owner[bank] != off) return false;
      owner[bank] = off;
    }
  return true;
}

template <class Cfg>
void expect_stage_copies_fill_aligned_lines(int t1) {
  using T = typename Cfg::T;
  const int pitch = Cfg::rows_per_block(t1), per_column = t1 / Cfg::COLUMNS_PER_COPY;
  ASSERT_EQ(pitch * int(sizeof(T)) % 128, 0) << "columns start on 128-byte lines";
  ASSERT_EQ(per_column * Cfg::VEC, pitch) << "a copy instruction's threads cover whole columns";
  std::set<int> slots;
  for (int tid = 0; tid < t1; ++tid) {
    const int copy_col = Cfg::copy_column(tid, t1), q = Cfg::copy_piece(tid, t1);
    for (int i = 0; i < Cfg::COPIES; ++i) {
      const int c = copy_col + Cfg::COLUMNS_PER_COPY * i, off = Cfg::piece(c, q, pitch);
      EXPECT_EQ((off - c * pitch) * int(sizeof(T)) / 128, q * Cfg::VEC * int(sizeof(T)) / 128)
          << "column " << c << " piece " << q << " stays in its 128-byte line";
      EXPECT_EQ(off * int(sizeof(T)) % 16, 0) << "16-byte copies stay aligned";
      // The kernel keeps two offsets and adds whole column pairs for the others.
      EXPECT_EQ(off, Cfg::piece(copy_col + (i % 2) * Cfg::COLUMNS_PER_COPY, q, pitch) +
                         i / 2 * 2 * Cfg::COLUMNS_PER_COPY * pitch);
      slots.insert(off);
    }
  }
  EXPECT_EQ(static_cast<int>(slots.size()), Cfg::G * per_column) << "the copies fill the stage once";
  // What the speed depends on (H100): with t1 >= 128 a warp's copy instruction reads 512 contiguous
  // bytes of one column of A.
  if (t1 >= 128)
    for (int warp = 0; warp < t1 / 32; ++warp) {
      const int first = 32 * warp, last = first + 31;
      EXPECT_EQ(Cfg::copy_column(first, t1), Cfg::copy_column(last, t1)) << "warp " << warp << ": one column";
      EXPECT_EQ(Cfg::copy_piece(last, t1) - Cfg::copy_piece(first, t1), 31) << "warp " << warp << ": consecutive rows";
    }
}

template <class Cfg>
void expect_a_fragment_reads_find_their_rows(int t1) {
  using T = typename Cfg::T;
  const int pitch = Cfg::rows_per_block(t1);
  for (int warp = 0; warp < t1 / 32; ++warp)
    for (int quarter = 0; quarter < 4; ++quarter)
      for (int u = 0; u < Cfg::G / 8; ++u)
        for (int s = 0; s < 2; ++s) {
          std::vector<int> bytes;
          for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
            const int g = lane / 4, t = lane % 4, col = 8 * u + 2 * t + s;
            const int off = Cfg::a_lane(warp, g, t, pitch) + (8 * u + s) * pitch;  // as the kernel reads
            EXPECT_EQ(off, Cfg::piece(col, 8 * warp + g, pitch))
                << "warp " << warp << " lane " << lane << " reads its rows VEC g.. of column " << col;
            bytes.push_back(off * int(sizeof(T)));
          }
          EXPECT_TRUE(conflict_free(bytes, 16))
              << "warp " << warp << ", quarter " << quarter << ", k8 step " << u << ", s " << s;
        }
}

template <class Cfg>
void expect_stage_layout() {
  for (int t1 : {64, 128, 256, 512}) {
    if (t1 > Cfg::MAX_T1) continue;
    SCOPED_TRACE("t1 = " + std::to_string(t1));
    expect_stage_copies_fill_aligned_lines<Cfg>(t1);
    expect_a_fragment_reads_find_their_rows<Cfg>(t1);
  }
}

TEST(Tsm2CmMmaLayout, StageCopiesFillAlignedLinesAndFragmentReadsAreConflictFree) {
  expect_stage_layout<CmMmaCfg<float, CmMath::dmma, 1>>();
  expect_stage_layout<CmMmaCfg<float, CmMath::dmma, 2>>();
  expect_stage_layout<CmMmaCfg<double, CmMath::dmma, 1>>();
  expect_stage_layout<CmMmaCfg<double, CmMath::dmma, 2>>();
  expect_stage_layout<CmMmaCfg<float, CmMath::tf32x3, 2>>();
}

TEST(Tsm2CmMmaLayout, Tf32BufferHoldsEachHalfOnceInFragmentOrder) {
  using Cfg = CmMmaCfg<float, CmMath::tf32x3, 2>;
  std::set<int> slots;
  for (int j = 0; j < Cfg::T2; ++j)
    for (int pp = 0; pp < Cfg::KC; ++pp) {
      const int hi = Cfg::tf32_slot(j, pp);
      EXPECT_LT(hi + 4, Cfg::B_BUF);
      slots.insert(hi);
      slots.insert(hi + 4);
    }
  EXPECT_EQ(static_cast<int>(slots.size()), 2 * Cfg::T2 * Cfg::KC) << "every high and low half has its own slot";

  // Lane (g, t) reads 4 high halves at b_lane + 4 kstep G + 32 u and the 4 low halves 4 further: the
  // mma's A fragment a0..a3 = B^T(g, 2t), B^T(g + 8, 2t), B^T(g, 2t + 1), B^T(g + 8, 2t + 1) of the k8 step.
  for (int kstep = 0; kstep < Cfg::SPC; ++kstep)
    for (int u = 0; u < Cfg::G / 8; ++u)
      for (int quarter = 0; quarter < 4; ++quarter) {
        std::vector<int> hi_bytes, lo_bytes;
        for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
          const int g = lane / 4, t = lane % 4;
          const int base = g * Cfg::LDB + 8 * t + 4 * kstep * Cfg::G + 32 * u;  // the kernel's b_lane + ..
          for (int e = 0; e < 4; ++e)
            EXPECT_EQ(base + e, Cfg::tf32_slot(g + 8 * (e & 1), kstep * Cfg::G + 8 * u + 2 * t + (e >> 1)))
                << "lane " << lane << " register " << e;
          hi_bytes.push_back(4 * base);
          lo_bytes.push_back(4 * (base + 4));
        }
        EXPECT_TRUE(conflict_free(hi_bytes, 16)) << "high halves, quarter " << quarter;
        EXPECT_TRUE(conflict_free(lo_bytes, 16)) << "low halves, quarter " << quarter;
      }
}

template <class Cfg>
void expect_dmma_b_reads_conflict_free() {
  using T = typename Cfg::T;
  const int lanes = sizeof(T) == 4 ? 16 : 8;  // float2: a half warp per wavefront; double2: a quarter
  for (int kstep = 0; kstep < Cfg::SPC; ++kstep)
    for (int u = 0; u < Cfg::G / 8; ++u)
      for (int m = 0; m < Cfg::T2 / 8; ++m)
        for (int first = 0; first < 32; first += lanes) {
          std::vector<int> bytes;
          for (int lane = first; lane < first + lanes; ++lane) {
            const int g = lane / 4, t = lane % 4;
            bytes.push_back(int(sizeof(T)) * (g * Cfg::LDB + 2 * t + kstep * Cfg::G + 8 * m * Cfg::LDB + 8 * u));
          }
          EXPECT_TRUE(conflict_free(bytes, 2 * int(sizeof(T)))) << "m-tile " << m << ", lanes " << first << "..";
        }
}

TEST(Tsm2CmMmaLayout, DmmaBReadsAreConflictFree) {
  expect_dmma_b_reads_conflict_free<CmMmaCfg<float, CmMath::dmma, 1>>();
  expect_dmma_b_reads_conflict_free<CmMmaCfg<float, CmMath::dmma, 2>>();
  expect_dmma_b_reads_conflict_free<CmMmaCfg<double, CmMath::dmma, 1>>();
  expect_dmma_b_reads_conflict_free<CmMmaCfg<double, CmMath::dmma, 2>>();
}

TEST(Tsm2CmMmaLayout, ConflictCheckSeesConflicts) {
  // The check itself: two 16-byte reads 128 bytes apart share their banks; the same address is a broadcast.
  EXPECT_FALSE(conflict_free({0, 128}, 16));
  EXPECT_TRUE(conflict_free({0, 0}, 16));
  EXPECT_TRUE(conflict_free({0, 16, 32, 48, 64, 80, 96, 112}, 16));
}

}  // namespace
