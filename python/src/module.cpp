// skinny._skinny: the compiled half of the Python package (python/skinny/ is the other half).
#include "bindings.hpp"

#include <skinny/gemm/context.hpp>

namespace nb = nanobind;

NB_MODULE(_skinny, m) {
  m.doc() = "skinny's C++/CUDA library: Lloyd K-means, GEMM and ABFT on the GPU (use the skinny package, not this)";
  m.attr("__version__") = SKINNY_VERSION;
  m.def("cuda_device_count", &skinny::cuda_device_count,
        "Number of visible CUDA devices; 0 without a driver or a device (never raises).");
  skinny::python::register_errors();
  skinny::python::bind_kmeans(m);
  skinny::python::bind_gemm(m);
  skinny::python::bind_abft(m);
}
