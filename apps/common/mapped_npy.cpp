#include "mapped_npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace skinny::apps {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

}  // namespace

MappedNpy::MappedNpy(const std::string& path) : path_(path) {
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
    header_ = read_npy_header(in, path);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot read its size (") + std::strerror(err) + ")");
  }
  try {
    check_npy_data(path, header_, static_cast<std::int64_t>(st.st_size) - header_.data_offset);
    if (header_.data_offset % header_.elem_bytes != 0)
      fail(path, ".npy data starts at byte " + std::to_string(header_.data_offset) + ", not a multiple of its " +
                     std::to_string(header_.elem_bytes) + "-byte elements");
  } catch (...) {
    ::close(fd);
    throw;
  }
  map_bytes_ = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) fail(path, std::string("cannot map it into memory (") + std::strerror(err) + ")");
  map_ = map;
}

MappedNpy::~MappedNpy() {
  if (map_) ::munmap(map_, map_bytes_);
}

MappedNpy::MappedNpy(MappedNpy&& other) noexcept
    : path_(std::move(other.path_)), header_(other.header_), map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)) {}

MappedNpy& MappedNpy::operator=(MappedNpy&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, map_bytes_);
    path_ = std::move(other.path_);
    header_ = other.header_;
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
  }
  return *this;
}

}  // namespace skinny::apps
