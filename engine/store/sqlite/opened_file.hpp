// The file a SQLite connection opened, told apart from whatever is at its
// path later. A file removed or replaced under a running process (a backup
// restored by moving it into place) would take the connection's writes in
// the old file, which no other process reads: they would be lost while
// each said it succeeded. A connection checks the path before it writes or
// reads, and fails instead.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>

#include "ratchet/status.hpp"

namespace ratchet::store {

class OpenedFile {
 public:
  // The file now at `path` (none for a database without a file, such as
  // ":memory:").
  explicit OpenedFile(std::filesystem::path path);

  // The error when the file at the path is no longer the one opened;
  // empty while it is, or when that cannot be told (a folder's rights
  // changed: SQLite's own errors say more).
  std::optional<Error> replaced() const;

 private:
  std::filesystem::path path_;
  struct Id {
    dev_t dev = 0;
    ino_t ino = 0;
  };
  std::optional<Id> opened_;
};

}  // namespace ratchet::store
