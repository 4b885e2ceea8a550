// A tiny program using skinny as a library user would: validate a GEMM on the host, and run it when
// there is a GPU. Built in CI against the installed package and through add_subdirectory.
#include <skinny/abft/abft.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cstdio>
#include <vector>

int main() {
  namespace g = skinny::gemm;
  static float host[4];
  const g::Arguments<float> probe{g::row_major<const float>(host, 2, 2), g::row_major<const float>(host, 2, 2),
                                  g::row_major(host, 2, 2)};
  if (!g::can_implement(g::Algo::vectorized, probe)) return 1;
  // The applications' host-side pieces link too.
  if (skinny::kmeans::adjusted_rand_index({0, 0, 1}, {4, 4, 2}) != 1.0) return 1;
  if (!skinny::abft::cannot_encode(skinny::abft::Backend::fused, 4096, 4096, 0).empty()) return 1;
  if (skinny::cuda_device_count() == 0) {
    std::printf("consumer: linked skinny::gemm (%zu algorithms), skinny::kmeans, skinny::abft; no GPU, host-side check only\n",
                g::algorithms().size());
    return 0;
  }
  skinny::DeviceBuffer<float> a(std::vector<float>{1, 2, 3, 4}), b(std::vector<float>{5, 6, 7, 8}), c(4);
  skinny::Context ctx;
  g::gemm(ctx, {g::row_major<const float>(a.data(), 2, 2), g::row_major<const float>(b.data(), 2, 2),
                g::row_major(c.data(), 2, 2)});
  const auto r = c.to_host();
  const bool ok = r == std::vector<float>{19, 22, 43, 50};
  std::printf("consumer: [[1 2][3 4]] * [[5 6][7 8]] = [[%g %g][%g %g]] %s\n", r[0], r[1], r[2], r[3],
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
