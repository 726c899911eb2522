// A private temporary folder for one test's files, removed afterwards.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace ratchet::testing {

// Where a test that counts what the engine does while it waits keeps its
// database: a memory file system (/dev/shm) when the machine has one, the
// temporary folder otherwise. On a disk under heavy writeback a write()
// blocks for a second or more (the kernel throttles whoever dirties pages);
// every wake-up the store writes meanwhile comes at once afterwards, late,
// and the engine's waits then measure the disk.
inline std::filesystem::path memory_temp_base() {
  std::error_code ec;
  const std::filesystem::path shm = "/dev/shm";
  if (std::filesystem::is_directory(shm, ec) && ::access(shm.c_str(), W_OK | X_OK) == 0) return shm;
  return std::filesystem::temp_directory_path();
}

class TempDir {
 public:
  // mkdtemp: a fresh folder (mode 0700), never a leftover of a killed run.
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ratchet-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace ratchet::testing
