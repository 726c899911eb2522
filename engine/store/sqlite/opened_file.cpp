#include "store/sqlite/opened_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <utility>

namespace ratchet::store {

OpenedFile::OpenedFile(std::filesystem::path path) : path_(std::move(path)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) opened_ = Id{st.st_dev, st.st_ino};
}

std::optional<Error> OpenedFile::replaced() const {
  if (!opened_) return std::nullopt;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (st.st_dev == opened_->dev && st.st_ino == opened_->ino) return std::nullopt;
  } else if (errno != ENOENT && errno != ENOTDIR) {
    return std::nullopt;
  }
  return Error::database("the database file " + path_.string() +
                         " was removed or replaced while this process had it open; its writes would go "
                         "to the old file, which nothing else reads: restart to open the file now there");
}

}  // namespace ratchet::store
