// One plugin library loaded from a private copy of a file in the plugin folder.
//
// load_library() copies the file into a private directory (so a file being
// overwritten in the folder never changes mapped code), checks it is a
// complete ELF shared object, loads it with Boost.DLL, finds the versioned
// entry point and validates the descriptor it returns: ABI version, struct
// sizes, name, version and operations. Every refusal names the reason.
//
// Ownership: a Library is held by shared_ptr. The plugin registry holds one
// reference; every call in flight holds another, so the code stays mapped
// until the last call returns, even after a newer version replaced it or the
// host is gone. The destructor runs the plugin's shutdown hook, unloads the
// library and deletes the private copy. Function pointers from a Library are
// only used while a reference to it is held.
//
// Thread-safety: immutable after loading; share freely.
#pragma once

#include <cstddef>
#include <expected>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "ratchet/plugin.h"

namespace ratchet::plugin_host {

class Library {
 public:
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::filesystem::path& file() const { return file_; }  // in the plugin folder
  std::vector<std::string> operations() const;

  // The operation's function, or nullptr if the plugin has none of that name.
  ratchet_operation_fn find(std::string_view operation) const;
  // Its estimate function, or nullptr (none, or built before there was one).
  ratchet_estimate_fn find_estimate(std::string_view operation) const;

 private:
  friend struct LibraryLoader;
  Library() = default;

  boost::dll::shared_library lib_;
  const ratchet_plugin_descriptor* descriptor_ = nullptr;
  std::string name_;
  std::string version_;
  std::filesystem::path file_;
  std::filesystem::path copy_;
  struct Operation {
    std::string name;
    ratchet_operation_fn fn = nullptr;
    ratchet_estimate_fn estimate = nullptr;
  };
  std::vector<Operation> operations_;
  void (*shutdown_)(void) = nullptr;
};

struct LoadFailure {
  std::string reason;  // without the file name
  bool retry = false;  // the file changed while read: try again on the next scan
};

// Loads `file` via a copy at `private_copy` (which must not exist yet).
std::expected<std::shared_ptr<const Library>, LoadFailure> load_library(
    const std::filesystem::path& file, const std::filesystem::path& private_copy);

// How many libraries are loaded right now, in this process (for tests and
// diagnostics: a reloaded or removed plugin's old version must drop out).
std::size_t live_library_count() noexcept;

}  // namespace ratchet::plugin_host
