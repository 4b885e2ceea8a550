// MappedNpy: a .npy file mapped read-only into memory, for data larger than the GPU (and than one wants
// to copy in host memory): the header is checked as read_npy checks it, the values are read from the
// page cache as they are touched, in place. A streamed k-means reads it chunk by chunk.
#pragma once

#include "matrix_io.hpp"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace skinny::apps {

class MappedNpy {
 public:
  /// Maps `path`; throws std::runtime_error naming the file for what read_npy refuses (magic bytes,
  /// version, dtype, Fortran order, shape, a data size other than the header's) and when it cannot be
  /// opened or mapped. NaN and infinity are not looked for here (require_finite, or the stream's check).
  explicit MappedNpy(const std::string& path);
  ~MappedNpy();
  MappedNpy(MappedNpy&& other) noexcept;
  MappedNpy& operator=(MappedNpy&& other) noexcept;
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;

  const std::string& path() const noexcept { return path_; }
  std::int64_t rows() const noexcept { return header_.rows; }
  std::int64_t cols() const noexcept { return header_.cols; }
  int elem_bytes() const noexcept { return header_.elem_bytes; }  ///< 4: float32, 8: float64
  std::int64_t data_bytes() const noexcept { return header_.data_bytes; }
  const void* data() const noexcept { return static_cast<const char*>(map_) + header_.data_offset; }
  /// The values as T (rows x cols row-major); throws unless the file holds T.
  template <class T>
  const T* values() const {
    if (sizeof(T) != static_cast<std::size_t>(header_.elem_bytes))
      throw std::runtime_error(path_ + ": holds " + (header_.elem_bytes == 4 ? "float32" : "float64") +
                               " values, not " + (sizeof(T) == 4 ? "float32" : "float64"));
    return static_cast<const T*>(data());
  }

 private:
  std::string path_;
  NpyHeader header_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
};

}  // namespace skinny::apps
