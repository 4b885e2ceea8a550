// GEMM bindings: the registry's names, and C = A B on CUDA arrays the caller owns (all three).
#include "arrays.hpp"
#include "bindings.hpp"

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

namespace skinny::python {
namespace {

template <class T>
void multiply(const Matrix& a, const Matrix& b, Matrix& c, gemm::Algo algo) {
  const auto m = std::int64_t(a.shape(0)), k = std::int64_t(a.shape(1)), n = std::int64_t(b.shape(1));
  const gemm::Arguments<T> args{gemm::row_major<const T>(static_cast<const T*>(a.data()), m, k),
                                gemm::row_major<const T>(static_cast<const T*>(b.data()), k, n),
                                gemm::row_major<T>(static_cast<T*>(c.data()), m, n)};
  DeviceScope scope(c);
  nb::gil_scoped_release no_gil;
  Context ctx;  // the legacy default stream: ordered after CuPy's and PyTorch's default streams
  gemm::gemm(ctx, args, algo);
  ctx.synchronize();  // c is ready when this returns, whatever stream the caller reads it on
}

}  // namespace

void bind_gemm(nb::module_& m) {
  m.def("algo_names", &gemm::algo_names, "The registry's algorithm names, \"auto\" first.");
  m.def(
      "algorithms",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& info : gemm::algorithms()) out.emplace_back(std::string(info.name), std::string(info.summary));
        return out;
      },
      "(name, summary) of every registered algorithm, in registry order.");
  m.def(
      "gemm",
      [](const Matrix& a, const Matrix& b, Matrix c, const std::string& algo_name) {
        const gemm::Algo algo = gemm::algo_from_name(algo_name);
        for (const Matrix* x : {&a, &b, const_cast<const Matrix*>(&c)})
          if (!on_cuda(*x) || x->device_id() != c.device_id())
            throw std::invalid_argument("gemm: A, B and out must be CUDA arrays on one device");
        if (a.dtype() != b.dtype() || a.dtype() != c.dtype())
          throw nb::type_error("gemm: A, B and out must have one dtype (float32 or float64)");
        if (a.shape(1) != b.shape(0) || c.shape(0) != a.shape(0) || c.shape(1) != b.shape(1))
          throw std::invalid_argument("gemm: shapes do not multiply: A " + std::to_string(a.shape(0)) + " x " +
                                      std::to_string(a.shape(1)) + ", B " + std::to_string(b.shape(0)) + " x " +
                                      std::to_string(b.shape(1)) + ", out " + std::to_string(c.shape(0)) + " x " +
                                      std::to_string(c.shape(1)));
        if (holds<float>(a)) return multiply<float>(a, b, c, algo);
        if (holds<double>(a)) return multiply<double>(a, b, c, algo);
        throw nb::type_error("gemm: expected float32 or float64 arrays");
      },
      nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("out").noconvert(), nb::arg("algo"),
      "out = a @ b on the GPU (row-major CUDA arrays); waits for the result.");
}

}  // namespace skinny::python
