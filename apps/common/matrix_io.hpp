// Host matrices in and out of files: NumPy .npy (float16/32/64, C order, 2-D, or 1-D read as one column), CSV (with or without a
// header line) and headerless raw binary. Readers validate everything they read and throw
// std::runtime_error naming the file, the place and what was wrong; they also refuse NaN and Inf.
// Writers go through a temporary file and a rename, so a failed write leaves no half-written file.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace skinny::apps {

/// A dense row-major rows x cols matrix on the host.
template <class T>
struct HostData {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<T> values;  ///< rows * cols elements, row i at values[i * cols]
};

enum class FileFormat { npy, csv, raw };

/// .npy -> npy; .csv, .txt -> csv; anything else -> raw (headerless binary).
FileFormat format_from_path(const std::string& path);

/// Element type of raw binary files (they carry no header).
enum class RawType { f32, f64 };

/// How to read a file whose format carries no shape or type (raw binary).
struct ReadOptions {
  std::int64_t raw_cols = 0;      ///< columns of a raw file (required for raw; ignored otherwise)
  RawType raw_type = RawType::f32;
};

/// A matrix file's shape without its values: a .npy's header, a raw file's size (CSV: read whole).
struct MatrixShape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};
MatrixShape read_matrix_shape(const std::string& path, const ReadOptions& options = {});

/// Rows [begin, begin + count) of a matrix file (one MPI rank's shard): .npy and raw read only those
/// bytes; CSV is read whole and those rows kept. Checked as read_matrix checks (finite values).
template <class T>
HostData<T> read_matrix_rows(const std::string& path, const ReadOptions& options, std::int64_t begin, std::int64_t count);

/// Reads any supported format (chosen by format_from_path), converting to T.
template <class T>
HostData<T> read_matrix(const std::string& path, const ReadOptions& options = {});

/// The readers on streams (what read_matrix and the fuzz target call). `name` prefixes error messages.
template <class T>
HostData<T> read_npy(std::istream& in, const std::string& name);
template <class T>
HostData<T> read_csv(std::istream& in, const std::string& name);
template <class T>
HostData<T> read_raw(std::istream& in, const std::string& name, std::int64_t cols, RawType type);

/// Throws "<name>: non-finite value (nan) at row r, column c" for the first NaN/Inf.
template <class T>
void require_finite(const HostData<T>& m, const std::string& name);
/// The same for rows x cols row-major values in place (a memory-mapped file).
template <class T>
void require_finite(const T* values, std::int64_t rows, std::int64_t cols, const std::string& name);

/// A .npy header, validated: the element type, the shape (a 1-D array is one column), and where the
/// data starts and how long it is.
struct NpyHeader {
  int elem_bytes = 0;  ///< 2 (float16), 4 (float32) or 8 (float64)
  std::int64_t rows = 0, cols = 0;
  std::int64_t data_offset = 0;  ///< bytes before the data: magic, version, header length and header
  std::int64_t data_bytes = 0;   ///< rows * cols * elem_bytes
};
/// Reads and checks the header at the stream's position (magic bytes, version, dtype, order, shape;
/// throws like read_npy): what read_npy and MappedNpy share.
NpyHeader read_npy_header(std::istream& in, const std::string& name);
/// Throws unless `have` (the bytes after the header; < 0: unknown, not checked) is the header's data size,
/// naming a truncated file as such.
void check_npy_data(const std::string& name, const NpyHeader& header, std::int64_t have);

/// The bytes of a .npy file holding rows x cols row-major values (T: float, double, std::int32_t).
template <class T>
std::string npy_bytes(const T* values, std::int64_t rows, std::int64_t cols);
/// CSV text: one line per row, values separated by commas, floats with round-trip precision.
template <class T>
std::string csv_text(const T* values, std::int64_t rows, std::int64_t cols);

/// Writes .npy or CSV chosen by the extension (.npy; .csv or .txt); anything else is refused.
template <class T>
void write_matrix(const std::string& path, const T* values, std::int64_t rows, std::int64_t cols);

/// Throws unless `path` has an extension write_matrix accepts (checked before any work is done).
void check_output_format(const std::string& path);

}  // namespace skinny::apps
