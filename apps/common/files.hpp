// Output files that are either whole or absent: checked before any work, written through a rename.
#pragma once

#include <string>

namespace skinny::apps {

/// Throws when `path` cannot be written (checked before any GPU work, so nothing runs in vain).
void check_writable(const std::string& path);

/// Writes `content` to `path` through a temporary file and a rename: never a half-written file.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace skinny::apps
