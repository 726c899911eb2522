// A fresh plugin folder per test (a TempDir), filled with copies of the test plugins
// built under RATCHET_FIXTURE_DIR; removed when the test ends.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.hpp"

namespace ratchet::testing {

class TestFolder {
 public:
  TestFolder() = default;
  TestFolder(const TestFolder&) = delete;
  TestFolder& operator=(const TestFolder&) = delete;

  const std::filesystem::path& path() const { return dir_.path(); }

  static std::filesystem::path fixture(const std::string& name) {
    return std::filesystem::path(RATCHET_FIXTURE_DIR) / (name + ".so");
  }

  // Copies fixture `name`.so into the folder as `as` (default: same name),
  // overwriting in place like `cp` does.
  std::filesystem::path add(const std::string& name, std::string as = {}) {
    auto to = dir_.path() / (as.empty() ? name + ".so" : as);
    std::filesystem::copy_file(fixture(name), to, std::filesystem::copy_options::overwrite_existing);
    return to;
  }
  std::filesystem::path write(const std::string& file, const std::string& content) {
    auto to = dir_.path() / file;
    std::ofstream(to, std::ios::binary | std::ios::trunc) << content;
    return to;
  }
  // The first `bytes` bytes of fixture `name`, as a copy cut short would be.
  std::filesystem::path add_truncated(const std::string& name, const std::string& as, std::size_t bytes) {
    std::ifstream in(fixture(name), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return write(as, data.substr(0, bytes));
  }

 private:
  TempDir dir_;
};

}  // namespace ratchet::testing
