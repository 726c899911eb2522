// The private folder a PluginHost loads its copies of plugin libraries from,
// and the removal of such folders left behind by processes that are gone.
//
// Each engine process copies every plugin it loads into a fresh folder of
// its own under the temp directory (`ratchet-plugins-XXXXXX`, mode 0700), so
// that a plugin file replaced in the plugin folder never changes code that
// is mapped. A process that stops cleanly removes its folder; one killed
// with SIGKILL cannot, and its copies (tens of megabytes each) would pile
// up until the disk is full. So each folder names its owner in a file
// `owner` (boot id, pid namespace, pid and the process's start time), and
// every new host first removes the folders whose owner is gone:
//   - another boot: gone;
//   - same boot and pid namespace, and no process with that pid and start
//     time: gone (a pid reused by a newer process does not keep it alive);
//   - another pid namespace (a container sharing /tmp): unknown, kept;
//   - no `owner` file (a folder being created right now, or one made by an
//     older ratchet): removed once it is older than `legacy_age`.
// Only folders owned by this user are considered.
//
// Thread-safety: free functions; safe to call from any thread.
#pragma once

#include <chrono>
#include <filesystem>

#include "ratchet/status.hpp"

namespace ratchet::plugin_host {

// Creates a fresh private folder under `parent` and records this process
// as its owner. Fails with kIo, naming the folder and the cause.
[[nodiscard]] Result<std::filesystem::path> make_private_dir(const std::filesystem::path& parent);

struct SweepReport {
  int removed = 0;  // folders of gone owners
  int kept = 0;     // folders of live or unknown owners
};

// Removes the private folders under `parent` whose owner is gone (see the
// header comment). Errors on single folders are skipped: a folder that
// cannot be removed now is tried again by the next host.
SweepReport sweep_private_dirs(const std::filesystem::path& parent,
                               std::chrono::seconds legacy_age = std::chrono::minutes(10));

}  // namespace ratchet::plugin_host
