#include "files.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace skinny::apps {

void check_writable(const std::string& path) {
  const std::string probe = path + ".tmp";
  std::ofstream out(probe, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out.close();
  std::remove(probe.c_str());
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write " + path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path);
  }
}

}  // namespace skinny::apps
