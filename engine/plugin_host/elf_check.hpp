// Checks that a file is a complete ELF shared object for this machine before
// it is handed to the dynamic loader.
//
// dlopen of a truncated library can map pages past the end of the file and
// crash the process with SIGBUS on first touch, and its errors for a text
// file are cryptic; this check turns both into a clear reason. A file whose
// headers point past its end is reported as incomplete: usually a copy still
// being written, which the host retries when the file changes.
//
// Thread-safety: a pure function of the file's bytes.
#pragma once

#include <filesystem>
#include <string>

namespace ratchet::plugin_host {

struct ElfCheck {
  bool ok = false;
  bool incomplete = false;  // plausible start of a library, but truncated
  std::string reason;       // why not ok, for "<file>: <reason>"
};

ElfCheck check_elf_shared_object(const std::filesystem::path& file);

}  // namespace ratchet::plugin_host
