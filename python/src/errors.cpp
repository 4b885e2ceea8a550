// skinny's exceptions in Python. nanobind already maps std::invalid_argument to ValueError,
// std::bad_alloc to MemoryError and other std::exceptions to RuntimeError, each with what(); CUDA and
// cuBLAS errors are runtime_errors too, except out-of-memory, which becomes MemoryError.
#include "bindings.hpp"

#include <skinny/gemm/errors.hpp>

#include <exception>

namespace skinny::python {

void register_errors() {
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CudaError& e) {
      // A failed call leaves its (non-sticky) error as the runtime's last error, which the next launch
      // check would report as its own: clear it, since this one is reported now.
      cudaGetLastError();
      PyErr_SetString(e.code() == cudaErrorMemoryAllocation ? PyExc_MemoryError : PyExc_RuntimeError, e.what());
    } catch (const CublasError& e) {
      PyErr_SetString(e.status() == CUBLAS_STATUS_ALLOC_FAILED ? PyExc_MemoryError : PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace skinny::python
