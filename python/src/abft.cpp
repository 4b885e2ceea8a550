// ABFT bindings: checksum encoders, protected GEMMs, fault injection, and the CPU pieces (reference
// encoding, limits, bit flips). The Python layer (python/skinny/abft.py) has checked every argument.
//
// Python's arrays are row-major and the library is column-major: a row-major m x n array A is the
// column-major n x m matrix A^T in the same memory. So every call hands the library the transpose and
// swaps rows and columns back: the row checksums of A are the column checksums of A^T (and the other way
// round), and C = A B is computed as C^T = B^T A^T, whose row r and column c are C's column r and row c.
#include "arrays.hpp"
#include "bindings.hpp"

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace skinny::python {
namespace {

using abft::Side;

std::string shape_text(std::int64_t rows, std::int64_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

Side side_from_name(const std::string& name) {
  if (name == "rows") return Side::rows;
  if (name == "cols") return Side::cols;
  if (name == "both") return Side::both;
  throw std::invalid_argument("unknown side '" + name + "' (valid: rows, cols, both)");
}

/// The side of A^T that holds the checksums asked for on A.
Side transposed(Side s) { return s == Side::rows ? Side::cols : s == Side::cols ? Side::rows : Side::both; }

bool is_double(const std::string& dtype) {
  if (dtype == "float32") return false;
  if (dtype == "float64") return true;
  throw nb::type_error(("abft: dtype " + dtype + " is not supported; use float32 or float64").c_str());
}

const char* finding_name(abft::Finding f) {
  switch (f) {
    case abft::Finding::clean: return "clean";
    case abft::Finding::corrected: return "corrected";
    case abft::Finding::detected_unlocated: return "detected_unlocated";
  }
  return "?";
}

template <class Array>
void expect_shape(const char* what, const Array& a, std::int64_t rows, std::int64_t cols) {
  if (std::int64_t(a.shape(0)) != rows || std::int64_t(a.shape(1)) != cols)
    throw std::invalid_argument(std::string(what) + " has shape " + shape_text(a.shape(0), a.shape(1)) + ", need " +
                                shape_text(rows, cols));
}

template <class T, class Array>
void expect_dtype(const char* what, const Array& a) {
  if (!holds<T>(a))
    throw nb::type_error((std::string(what) + ": expected " + (sizeof(T) == 8 ? "float64" : "float32")).c_str());
}

/// CUDA arrays must be on the device an object was made for (host arrays are copied there).
template <class Array>
void expect_device(const char* what, const Array& a, int device) {
  if (on_cuda(a) && int(a.device_id()) != device)
    throw std::invalid_argument(std::string(what) + " is on CUDA device " + std::to_string(a.device_id()) +
                                ", this object works on device " + std::to_string(device));
}

/// Makes `device` current for the construction of an object that lives on it (-1: the current one).
int use_device(int device) {
  if (device >= 0) SKINNY_CUDA_TRY(cudaSetDevice(device));
  int current = 0;
  SKINNY_CUDA_TRY(cudaGetDevice(&current));
  return current;
}

/// Runs f with `device` current, for destructors: never throws (DeviceScope's constructor may).
template <class F>
void on_device(int device, F f) noexcept {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device) cudaSetDevice(device);
  f();
  if (previous >= 0 && previous != device) cudaSetDevice(previous);
}

// ----------------------------------------------------------------------------------------------- encoder

/// abft::Encoder for row-major m x n arrays of one dtype, with its own Context on one device.
class PyEncoder {
 public:
  PyEncoder(std::int64_t m, std::int64_t n, const std::string& dtype, const std::string& side,
            const std::string& backend, std::int64_t density, int device)
      : m_(m), n_(n), density_(density), double_(is_double(dtype)), side_(side_from_name(side)) {
    const abft::EncodeParams params{transposed(side_), abft::backend_from_name(backend), density};
    const std::string why = abft::cannot_encode(params.backend, n, m, density);  // before any CUDA call
    if (!why.empty()) throw std::invalid_argument("abft.encode: " + why);
    DeviceScope keep(-1);  // restores the caller's current device afterwards
    device_ = use_device(device);
    ctx_ = std::make_unique<Context>();
    // A^T: n x m, column-major, leading dimension n.
    if (double_)
      f64_ = std::make_unique<abft::Encoder<double>>(*ctx_, n, m, n, params);
    else
      f32_ = std::make_unique<abft::Encoder<float>>(*ctx_, n, m, n, params);
  }
  ~PyEncoder() {
    on_device(device_, [&] {  // the weights and the cuBLAS handle are freed on their device
      f32_.reset();
      f64_.reset();
      ctx_.reset();
    });
  }

  void run(const ConstMatrix& a, std::optional<Matrix> rows, std::optional<Matrix> cols) {
    const bool want_rows = side_ != Side::cols, want_cols = side_ != Side::rows;
    if (want_rows != rows.has_value() || want_cols != cols.has_value())
      throw std::invalid_argument("abft.encode: pass the outputs for exactly the checksums asked for");
    expect_shape("abft.encode: a", a, m_, n_);
    expect_device("abft.encode: a", a, device_);
    if (rows) {
      expect_shape("abft.encode: the row checksums", *rows, m_, 2 * abft::blocks(n_, density_));
      expect_device("abft.encode: the row checksums", *rows, device_);
    }
    if (cols) {
      expect_shape("abft.encode: the column checksums", *cols, 2 * abft::blocks(m_, density_), n_);
      expect_device("abft.encode: the column checksums", *cols, device_);
    }
    if (double_)
      run_typed<double>(*f64_, a, rows, cols);
    else
      run_typed<float>(*f32_, a, rows, cols);
  }

  int device() const { return device_; }

 private:
  template <class T>
  void run_typed(abft::Encoder<T>& encoder, const ConstMatrix& a, const std::optional<Matrix>& rows,
                 const std::optional<Matrix>& cols) {
    expect_dtype<T>("abft.encode: a", a);
    if (rows) expect_dtype<T>("abft.encode: the row checksums", *rows);
    if (cols) expect_dtype<T>("abft.encode: the column checksums", *cols);
    DeviceScope scope(device_);
    nb::gil_scoped_release no_gil;
    const DeviceMatrix<T> da(a);
    std::optional<DeviceTarget<T>> r, c;
    if (rows) r.emplace(*rows, false);
    if (cols) c.emplace(*cols, false);
    // The row checksums of A are the column checksums of A^T, and the other way round.
    encoder.run(da.data(), c ? c->data() : nullptr, r ? r->data() : nullptr);
    ctx_->synchronize();  // the outputs are ready when this returns, whatever stream reads them
    if (r) r->copy_back();
    if (c) c->copy_back();
  }

  std::int64_t m_, n_, density_;
  bool double_;
  Side side_;
  int device_ = 0;
  std::unique_ptr<Context> ctx_;  // before the encoders, which refer to it: destroyed after them
  std::unique_ptr<abft::Encoder<float>> f32_;
  std::unique_ptr<abft::Encoder<double>> f64_;
};

// -------------------------------------------------------------------------------------- protected GEMM

/// Why `algo` cannot compute the row-major C (m x n) = A (m x k) B (k x n): "" when it can. The same shape
/// check ProtectedGemm's constructor makes, on the transposed problem it runs; no CUDA call.
template <class T>
std::string cannot_multiply(std::int64_t m, std::int64_t n, std::int64_t k, gemm::Algo algo) {
  T* probe = reinterpret_cast<T*>(std::uintptr_t(256));  // can_implement looks at shapes, never at data
  const gemm::Support s = gemm::can_implement(
      algo, gemm::Arguments<T>{gemm::col_major<const T>(probe, n, k), gemm::col_major<const T>(probe, k, m),
                               gemm::col_major(probe, n, m)});
  return s ? std::string() : s.reason;
}

/// abft::ProtectedGemm for row-major C (m x n) = A (m x k) B (k x n), with its own Context on one device.
class PyProtectedGemm {
 public:
  PyProtectedGemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype, const std::string& backend,
                  double gamma, double threshold, const std::string& threshold_model, int device)
      : m_(m), n_(n), k_(k), double_(is_double(dtype)) {
    const gemm::Algo algo = gemm::algo_from_name(backend);
    if (m < 1 || n < 1 || k < 1)
      throw std::invalid_argument("ProtectedGemm: need m, n, k >= 1 (got " + std::to_string(m) + ", " +
                                  std::to_string(n) + ", " + std::to_string(k) + ")");
    const std::string why = double_ ? cannot_multiply<double>(m, n, k, algo) : cannot_multiply<float>(m, n, k, algo);
    if (!why.empty()) throw std::invalid_argument("ProtectedGemm: " + why);
    DeviceScope keep(-1);
    device_ = use_device(device);
    ctx_ = std::make_unique<Context>();
    const abft::Threshold t{gamma, threshold, abft::threshold_model_from_name(threshold_model)};
    // C^T (n x m) = B^T (n x k) A^T (k x m).
    if (double_)
      f64_ = std::make_unique<abft::ProtectedGemm<double>>(*ctx_, n, m, k, algo, t);
    else
      f32_ = std::make_unique<abft::ProtectedGemm<float>>(*ctx_, n, m, k, algo, t);
  }
  ~PyProtectedGemm() {
    on_device(device_, [&] {
      f32_.reset();
      f64_.reset();
      ctx_.reset();
    });
  }

  void multiply(const ConstMatrix& a, const ConstMatrix& b, Matrix c, bool protect) {
    expect_operands("ProtectedGemm.multiply", a, b, c);
    if (double_)
      multiply_typed<double>(*f64_, a, b, c, protect);
    else
      multiply_typed<float>(*f32_, a, b, c, protect);
    if (protect) multiplied_ = true;
  }

  nb::dict verify_and_correct(Matrix c) {
    if (!multiplied_) throw std::runtime_error("ProtectedGemm.verify_and_correct: call multiply first");
    expect_shape("ProtectedGemm.verify_and_correct: c", c, m_, n_);
    expect_device("ProtectedGemm.verify_and_correct: c", c, device_);
    return report_dict(double_ ? verify_typed<double>(*f64_, c) : verify_typed<float>(*f32_, c));
  }

  nb::dict multiply_and_verify(const ConstMatrix& a, const ConstMatrix& b, Matrix c) {
    expect_operands("ProtectedGemm.multiply_and_verify", a, b, c);
    const abft::Report r = double_ ? multiply_and_verify_typed<double>(*f64_, a, b, c)
                                   : multiply_and_verify_typed<float>(*f32_, a, b, c);
    multiplied_ = true;
    return report_dict(r);
  }

  double min_threshold() const { return double_ ? f64_->min_threshold() : f32_->min_threshold(); }
  /// Threshold of the plain checksum of C's row i: C^T's column i.
  double threshold_row(std::int64_t i) const {
    check_index("threshold_row", i, m_);
    return double_ ? f64_->threshold_col(i) : f32_->threshold_col(i);
  }
  double threshold_col(std::int64_t j) const {
    check_index("threshold_col", j, n_);
    return double_ ? f64_->threshold_row(j) : f32_->threshold_row(j);
  }
  int device() const { return device_; }

 private:
  void check_index(const char* what, std::int64_t i, std::int64_t extent) const {
    if (!multiplied_) throw std::runtime_error(std::string("ProtectedGemm.") + what + ": call multiply first");
    if (i < 0 || i >= extent)
      throw nb::index_error(("ProtectedGemm." + std::string(what) + ": index " + std::to_string(i) +
                             " out of range [0, " + std::to_string(extent) + ")")
                                .c_str());
  }

  void expect_operands(const std::string& where, const ConstMatrix& a, const ConstMatrix& b, const Matrix& c) const {
    const auto what = [&](const char* name) { return where + ": " + name; };
    expect_shape(what("a").c_str(), a, m_, k_);
    expect_shape(what("b").c_str(), b, k_, n_);
    expect_shape(what("out").c_str(), c, m_, n_);
    expect_device(what("a").c_str(), a, device_);
    expect_device(what("b").c_str(), b, device_);
    expect_device(what("out").c_str(), c, device_);
  }

  /// A Report of C^T as Python's Report of C: rows and columns swap.
  static nb::dict report_dict(const abft::Report& r) {
    nb::dict out;
    out["finding"] = finding_name(r.finding);
    out["row"] = r.col;  // C^T's column is C's row
    out["col"] = r.row;
    out["error"] = r.error;
    out["inconsistent_rows"] = r.inconsistent_cols;
    out["inconsistent_cols"] = r.inconsistent_rows;
    out["max_ratio"] = r.max_ratio;
    return out;
  }

  /// The operands on the device, run(B^T, A^T, C^T) on them (C^T = B^T A^T: b's memory is B^T, a's is
  /// A^T), C back to `c`; what run returned.
  template <class T, class Run>
  abft::Report on_device_operands(const std::string& where, const ConstMatrix& a, const ConstMatrix& b, Matrix& c,
                                  Run run) {
    expect_dtype<T>((where + ": a").c_str(), a);
    expect_dtype<T>((where + ": b").c_str(), b);
    expect_dtype<T>((where + ": out").c_str(), c);
    DeviceScope scope(device_);
    nb::gil_scoped_release no_gil;
    const DeviceMatrix<T> da(a), db(b);
    DeviceTarget<T> dc(c, false);
    const abft::Report r = run(db.data(), da.data(), dc.data());
    ctx_->synchronize();
    dc.copy_back();
    return r;
  }

  template <class T>
  void multiply_typed(abft::ProtectedGemm<T>& pg, const ConstMatrix& a, const ConstMatrix& b, Matrix& c, bool protect) {
    on_device_operands<T>("ProtectedGemm.multiply", a, b, c, [&](const T* bt, const T* at, T* ct) {
      if (protect)
        pg.multiply(bt, at, ct);
      else
        pg.multiply_unprotected(bt, at, ct);
      return abft::Report{};
    });
  }

  template <class T>
  abft::Report verify_typed(abft::ProtectedGemm<T>& pg, Matrix& c) {
    expect_dtype<T>("ProtectedGemm.verify_and_correct: c", c);
    DeviceScope scope(device_);
    nb::gil_scoped_release no_gil;
    DeviceTarget<T> dc(c, true);
    const abft::Report r = pg.verify_and_correct(dc.data());
    // Element (r.row, r.col) of C^T (n x m, column-major) is at r.col * n + r.row: C[r.col, r.row].
    if (r.finding == abft::Finding::corrected) dc.copy_back_element(r.col * n_ + r.row);
    return r;
  }

  template <class T>
  abft::Report multiply_and_verify_typed(abft::ProtectedGemm<T>& pg, const ConstMatrix& a, const ConstMatrix& b,
                                         Matrix& c) {
    return on_device_operands<T>("ProtectedGemm.multiply_and_verify", a, b, c, [&](const T* bt, const T* at, T* ct) {
      return pg.multiply_and_verify(bt, at, ct);  // C corrected on the device before it is copied back
    });
  }

  std::int64_t m_, n_, k_;
  bool double_;
  bool multiplied_ = false;
  int device_ = 0;
  std::unique_ptr<Context> ctx_;  // before the protected GEMMs, which refer to it
  std::unique_ptr<abft::ProtectedGemm<float>> f32_;
  std::unique_ptr<abft::ProtectedGemm<double>> f64_;
};

// ------------------------------------------------------------------------------------------- injection

nb::dict injection_dict(const abft::Injection& inj) {
  nb::dict out;
  out["row"] = inj.col;  // the library saw A^T
  out["col"] = inj.row;
  out["bit"] = inj.bit;
  out["before"] = inj.before;
  out["after"] = inj.after;
  return out;
}

template <class T>
abft::Injection inject_bit_flip(Matrix& x, std::uint64_t seed, abft::BitRange range, std::int64_t row, std::int64_t col,
                                int bit) {
  const auto m = std::int64_t(x.shape(0)), n = std::int64_t(x.shape(1));
  DeviceScope scope(x);
  nb::gil_scoped_release no_gil;
  DeviceTarget<T> dx(x, true);
  Context ctx;
  const abft::Injection inj = abft::inject_bit_flip<T>(ctx, dx.data(), n, m, seed, range, col, row, bit);
  dx.copy_back_element(inj.col * n + inj.row);
  return inj;
}

template <class T>
abft::Injection inject_add(Matrix& x, std::int64_t row, std::int64_t col, double value) {
  const auto n = std::int64_t(x.shape(1));
  DeviceScope scope(x);
  nb::gil_scoped_release no_gil;
  DeviceTarget<T> dx(x, true);
  Context ctx;
  const abft::Injection inj = abft::inject_add<T>(ctx, dx.data(), n, col, row, T(value));
  dx.copy_back_element(row * n + col);
  return inj;
}

void check_element(const char* what, const Matrix& x, std::int64_t row, std::int64_t col) {
  const auto m = std::int64_t(x.shape(0)), n = std::int64_t(x.shape(1));
  if (row >= m || col >= n || row < -1 || col < -1)
    throw std::invalid_argument(std::string(what) + ": element (" + std::to_string(row) + ", " + std::to_string(col) +
                                ") is outside the " + shape_text(m, n) + " array");
}

}  // namespace

void bind_abft(nb::module_& m) {
  m.def("abft_backend_names", &abft::backend_names, "The checksum encoders' names: cublas, tsm2, fused.");
  m.def(
      "abft_default_gamma",
      [](const std::string& model, const std::string& dtype) {
        const abft::ThresholdModel m = abft::threshold_model_from_name(model);
        return is_double(dtype) ? abft::default_gamma<double>(m) : abft::default_gamma<float>(m);
      },
      nb::arg("threshold_model"), nb::arg("dtype"),
      "The calibrated safety factor of a threshold model (rounding, l1) for float32 or float64.");
  m.def("abft_blocks", &abft::blocks, nb::arg("extent"), nb::arg("density"),
        "Number of checksum blocks along a dimension of `extent` for density b (0: one).");
  m.def(
      "abft_cannot_encode",
      [](const std::string& backend, std::int64_t m, std::int64_t n, std::int64_t density) {
        return abft::cannot_encode(abft::backend_from_name(backend), n, m, density);
      },
      nb::arg("backend"), nb::arg("m"), nb::arg("n"), nb::arg("density"),
      "Why `backend` cannot encode an m x n array at this density (\"\" when it can). No CUDA call.");
  m.def(
      "abft_cannot_multiply",
      [](std::int64_t m, std::int64_t n, std::int64_t k, const std::string& backend, const std::string& dtype) {
        if (m < 1 || n < 1 || k < 1) return std::string("need m, n, k >= 1");
        const gemm::Algo algo = gemm::algo_from_name(backend);
        return is_double(dtype) ? cannot_multiply<double>(m, n, k, algo) : cannot_multiply<float>(m, n, k, algo);
      },
      nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("backend"), nb::arg("dtype"),
      "Why the GEMM `backend` cannot compute C (m x n) = A (m x k) B (k x n) in dtype (\"\" when it can). No CUDA "
      "call.");
  m.def(
      "abft_reference_encode",
      [](const nb::ndarray<nb::ro, const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>& a, std::int64_t density) {
        const auto rows = std::int64_t(a.shape(0)), cols = std::int64_t(a.shape(1));
        const std::vector<double> values(a.data(), a.data() + a.size());
        std::vector<double> r_t, k_t;  // of A^T (cols x rows): its row checksums are A's column checksums
        abft::reference_encode(values, cols, rows, density, r_t, k_t);
        const auto row_width = std::size_t(2 * abft::blocks(cols, density));
        const auto col_height = std::size_t(2 * abft::blocks(rows, density));
        return std::make_pair(to_numpy(std::move(k_t), {std::size_t(rows), row_width}),
                              to_numpy(std::move(r_t), {col_height, std::size_t(cols)}));
      },
      nb::arg("a").noconvert(), nb::arg("density"),
      "CPU reference (double): (row checksums, column checksums) of a host float64 array.");
  m.def(
      "abft_flip_bit",
      [](double value, int bit, const std::string& dtype) {
        if (is_double(dtype)) return abft::flip_bit<double>(value, bit);
        return double(abft::flip_bit<float>(float(value), bit));
      },
      nb::arg("value"), nb::arg("bit"), nb::arg("dtype"), "value with bit `bit` flipped (0: lowest mantissa bit).");

  nb::class_<PyEncoder>(m, "AbftEncoder")
      .def(nb::init<std::int64_t, std::int64_t, const std::string&, const std::string&, const std::string&, std::int64_t,
                    int>(),
           nb::arg("m"), nb::arg("n"), nb::arg("dtype"), nb::arg("side"), nb::arg("backend"), nb::arg("density"),
           nb::arg("device"))
      .def("run", &PyEncoder::run, nb::arg("a").noconvert(), nb::arg("rows").noconvert().none(),
           nb::arg("cols").noconvert().none(), "Writes the checksums of a into rows / cols; waits for them.")
      .def_prop_ro("device", &PyEncoder::device);

  nb::class_<PyProtectedGemm>(m, "AbftProtectedGemm")
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, const std::string&, const std::string&, double, double,
                    const std::string&, int>(),
           nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("dtype"), nb::arg("backend"), nb::arg("gamma"),
           nb::arg("threshold"), nb::arg("threshold_model"), nb::arg("device"))
      .def("multiply", &PyProtectedGemm::multiply, nb::arg("a").noconvert(), nb::arg("b").noconvert(),
           nb::arg("out").noconvert(), nb::arg("protect"), "out = a @ b (with its carried checksums when protect).")
      .def("multiply_and_verify", &PyProtectedGemm::multiply_and_verify, nb::arg("a").noconvert(),
           nb::arg("b").noconvert(), nb::arg("out").noconvert(),
           "C = A B and its verification in one call (one pass over C): a single wrong element corrected; "
           "returns the report")
      .def("verify_and_correct", &PyProtectedGemm::verify_and_correct, nb::arg("c").noconvert(),
           "Checks c against the carried checksums; corrects one error in place. Returns a dict of the report.")
      .def_prop_ro("min_threshold", &PyProtectedGemm::min_threshold)
      .def("threshold_row", &PyProtectedGemm::threshold_row, nb::arg("i"))
      .def("threshold_col", &PyProtectedGemm::threshold_col, nb::arg("j"))
      .def_prop_ro("device", &PyProtectedGemm::device);

  m.def(
      "abft_inject_bit_flip",
      [](Matrix x, std::uint64_t seed, const std::string& bits, std::int64_t row, std::int64_t col, int bit) {
        check_element("inject_bit_flip", x, row, col);
        const abft::BitRange range = abft::bit_range_from_name(bits);
        if (holds<float>(x)) return injection_dict(inject_bit_flip<float>(x, seed, range, row, col, bit));
        if (holds<double>(x)) return injection_dict(inject_bit_flip<double>(x, seed, range, row, col, bit));
        throw nb::type_error("inject_bit_flip: expected a float32 or float64 array");
      },
      nb::arg("x").noconvert(), nb::arg("seed"), nb::arg("bits"), nb::arg("row"), nb::arg("col"), nb::arg("bit"),
      "Flips one bit of x in place (row, col, bit < 0: drawn from the seed). Returns a dict of the injection.");
  m.def(
      "abft_inject_add",
      [](Matrix x, std::int64_t row, std::int64_t col, double value) {
        check_element("inject_add", x, row, col);
        if (row < 0 || col < 0) throw std::invalid_argument("inject_add: row and col must be >= 0");
        if (holds<float>(x)) return injection_dict(inject_add<float>(x, row, col, value));
        if (holds<double>(x)) return injection_dict(inject_add<double>(x, row, col, value));
        throw nb::type_error("inject_add: expected a float32 or float64 array");
      },
      nb::arg("x").noconvert(), nb::arg("row"), nb::arg("col"), nb::arg("value"),
      "Adds value to x[row, col] in place. Returns a dict of the injection.");
}

}  // namespace skinny::python
