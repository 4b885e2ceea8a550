// Fault injection, reproducible from a seed: one bit of one element, or a value added to it.
#include <skinny/abft/abft.hpp>
#include <skinny/gemm/bit_flip.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <stdexcept>
#include <string>

namespace skinny::abft {
namespace {

/// [first, last] bit of a range for an element of `bits` bits with `mantissa` mantissa bits.
void bit_span(BitRange r, int bits, int mantissa, int& first, int& last) {
  switch (r) {
    case BitRange::any: first = 0; last = bits - 1; return;
    case BitRange::sign: first = last = bits - 1; return;
    case BitRange::exponent: first = mantissa; last = bits - 2; return;
    case BitRange::high_mantissa: first = mantissa / 2; last = mantissa - 1; return;
    case BitRange::low_mantissa: first = 0; last = mantissa / 2 - 1; return;
  }
}

template <class T>
T read(Context& ctx, const T* p) {
  T v{};
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&v, p, sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
  return v;
}
template <class T>
void write(Context& ctx, T* p, T v) {
  SKINNY_CUDA_TRY(cudaMemcpyAsync(p, &v, sizeof(T), cudaMemcpyHostToDevice, ctx.stream()));
  ctx.synchronize();
}

}  // namespace

template <class T>
T flip_bit(T v, int bit) {
  if (bit < 0 || bit >= int(8 * sizeof(T))) throw std::invalid_argument("flip_bit: bit " + std::to_string(bit) + " out of range");
  return with_bit_flipped(v, bit);
}

template <class T>
Injection inject_bit_flip(Context& ctx, T* x, std::int64_t m, std::int64_t n, std::uint64_t seed, BitRange range,
                          std::int64_t row, std::int64_t col, int bit) {
  if (x == nullptr || m < 1 || n < 1 || row >= m || col >= n)
    throw std::invalid_argument("inject_bit_flip: element (" + std::to_string(row) + ", " + std::to_string(col) +
                                ") of a " + std::to_string(m) + " x " + std::to_string(n) + " matrix");
  std::uint64_t state = splitmix64(seed ^ 0x464c4950ull);
  Injection inj;
  inj.row = row >= 0 ? row : static_cast<std::int64_t>(splitmix64(state++) % std::uint64_t(m));
  inj.col = col >= 0 ? col : static_cast<std::int64_t>(splitmix64(state++) % std::uint64_t(n));
  int first = 0, last = 0;
  bit_span(range, int(8 * sizeof(T)), sizeof(T) == 8 ? 52 : 23, first, last);
  inj.bit = bit >= 0 ? bit : first + static_cast<int>(splitmix64(state++) % std::uint64_t(last - first + 1));
  T* p = x + inj.col * m + inj.row;
  const T before = read(ctx, p);
  const T after = flip_bit(before, inj.bit);
  write(ctx, p, after);
  inj.before = double(before);
  inj.after = double(after);
  return inj;
}

template <class T>
Injection inject_add(Context& ctx, T* x, std::int64_t m, std::int64_t row, std::int64_t col, T value) {
  if (x == nullptr || m < 1 || row < 0 || row >= m || col < 0)
    throw std::invalid_argument("inject_add: element (" + std::to_string(row) + ", " + std::to_string(col) + ")");
  T* p = x + col * m + row;
  Injection inj;
  inj.row = row;
  inj.col = col;
  inj.bit = -1;
  const T before = read(ctx, p);
  write(ctx, p, T(before + value));
  inj.before = double(before);
  inj.after = double(T(before + value));
  return inj;
}

template float flip_bit(float, int);
template double flip_bit(double, int);
template Injection inject_bit_flip(Context&, float*, std::int64_t, std::int64_t, std::uint64_t, BitRange, std::int64_t,
                                   std::int64_t, int);
template Injection inject_bit_flip(Context&, double*, std::int64_t, std::int64_t, std::uint64_t, BitRange, std::int64_t,
                                   std::int64_t, int);
template Injection inject_add(Context&, float*, std::int64_t, std::int64_t, std::int64_t, float);
template Injection inject_add(Context&, double*, std::int64_t, std::int64_t, std::int64_t, double);

}  // namespace skinny::abft
