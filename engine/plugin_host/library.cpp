#include "plugin_host/library.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <set>
#include <system_error>
#include <utility>

#include "plugin_host/elf_check.hpp"

namespace ratchet::plugin_host {
namespace {

namespace fs = std::filesystem;

std::atomic<std::size_t> g_live_libraries{0};

std::unexpected<LoadFailure> refuse(std::string reason, bool retry = false) {
  return std::unexpected(LoadFailure{std::move(reason), retry});
}

bool valid_name(const char* s) {
  if (s == nullptr || *s == '\0') return false;
  for (; *s != '\0'; ++s)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
  return true;
}

struct FileSignature {
  std::uintmax_t size = 0;
  fs::file_time_type mtime{};
  bool operator==(const FileSignature&) const = default;
};

FileSignature signature_of(const fs::path& p, std::error_code& ec) {
  FileSignature s;
  s.size = fs::file_size(p, ec);
  if (!ec) s.mtime = fs::last_write_time(p, ec);
  return s;
}

// Boost.DLL clears dlerror(), so the loader's own explanation is fetched by
// asking once more directly.
std::string dlopen_reason(const fs::path& p) {
  void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) {
    ::dlclose(h);
    return "the dynamic loader refused it";
  }
  const char* e = ::dlerror();
  return e != nullptr ? e : "the dynamic loader refused it";
}

}  // namespace

// Friend of Library: builds one step by step.
struct LibraryLoader {
  static std::expected<std::shared_ptr<const Library>, LoadFailure> load(const fs::path& file,
                                                                         const fs::path& copy);
};

std::expected<std::shared_ptr<const Library>, LoadFailure> LibraryLoader::load(const fs::path& file,
                                                                               const fs::path& copy) {
  std::error_code ec;
  const FileSignature before = signature_of(file, ec);
  if (ec) return refuse("cannot be read: " + ec.message());
  fs::create_directories(copy.parent_path(), ec);
  if (!fs::copy_file(file, copy, ec) || ec)
    return refuse("cannot be copied to " + copy.string() + ": " + ec.message());
  // From here on the copy is ours; remove it whenever loading stops short.
  std::shared_ptr<Library> lib(new Library());
  lib->file_ = file;
  lib->copy_ = copy;

  const FileSignature after = signature_of(file, ec);
  if (ec || !(before == after) || fs::file_size(copy, ec) != before.size)
    return refuse(
        "the file changed while it was being read (still being written?); it is retried on the next scan",
        true);

  ElfCheck elf = check_elf_shared_object(copy);
  if (!elf.ok) return refuse(elf.reason);

  boost::dll::fs::error_code bec;
  lib->lib_.load(boost::dll::fs::path(copy.string()), bec,
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (bec || !lib->lib_.is_loaded()) return refuse("cannot be loaded: " + dlopen_reason(copy));
  ++g_live_libraries;  // the destructor decrements; counted once loaded

  if (!lib->lib_.has(RATCHET_PLUGIN_ENTRY_SYMBOL)) {
    for (int v = 2; v <= 9; ++v) {
      std::string other = "ratchet_plugin_entry_v" + std::to_string(v);
      if (lib->lib_.has(other))
        return refuse("no entry point " RATCHET_PLUGIN_ENTRY_SYMBOL ", but it exports " + other +
                      ": it was built for plugin ABI version " + std::to_string(v) +
                      "; this engine supports version 1");
    }
    return refuse("no entry point " RATCHET_PLUGIN_ENTRY_SYMBOL
                  ": not a ratchet plugin, or built without RATCHET_PLUGIN(...) / with the symbol hidden");
  }
  auto entry = lib->lib_.get<const ratchet_plugin_descriptor*()>(RATCHET_PLUGIN_ENTRY_SYMBOL);

  const ratchet_plugin_descriptor* d = nullptr;
  try {
    d = entry();
  } catch (...) {
    return refuse(
        "its entry point threw an exception; an entry point must return a descriptor and never fail");
  }
  if (d == nullptr) return refuse("its entry point returned no descriptor (NULL)");
  if (d->abi_version != RATCHET_PLUGIN_ABI_VERSION)
    return refuse("built for plugin ABI version " + std::to_string(d->abi_version) +
                  ", but this engine supports version " + std::to_string(RATCHET_PLUGIN_ABI_VERSION) +
                  "; rebuild it against this ratchet's include/ratchet/plugin.h");
  constexpr std::size_t kMinDescriptor = offsetof(ratchet_plugin_descriptor, init);
  if (d->struct_size < kMinDescriptor)
    return refuse("its descriptor is " + std::to_string(d->struct_size) + " bytes, smaller than the " +
                  std::to_string(kMinDescriptor) + " every ABI version 1 descriptor has");
  if (!valid_name(d->name))
    return refuse("its declared name is empty or not made of a-z, 0-9 and _ (it is what config calls it)");
  if (d->version == nullptr || *d->version == '\0') return refuse("it declares no version");
  if (d->operation_count == 0 || d->operations == nullptr) return refuse("it declares no operations");
  // Entries built before `estimate` was added end where it begins.
  constexpr std::size_t kMinOperation = offsetof(ratchet_operation, estimate);
  if (d->operation_size < kMinOperation)
    return refuse("its operation entries are " + std::to_string(d->operation_size) + " bytes, smaller than " +
                  std::to_string(kMinOperation));
  const bool has_estimate = d->operation_size >= offsetof(ratchet_operation, estimate) + sizeof(void*);
  std::set<std::string> seen;
  const auto* base = reinterpret_cast<const unsigned char*>(d->operations);
  for (std::uint32_t i = 0; i < d->operation_count; ++i) {
    const auto* op = reinterpret_cast<const ratchet_operation*>(base + std::size_t{i} * d->operation_size);
    if (!valid_name(op->name))
      return refuse("operation #" + std::to_string(i) +
                    " has an empty name or one not made of a-z, 0-9 and _");
    if (op->fn == nullptr) return refuse(std::string("operation '") + op->name + "' has no function");
    if (!seen.insert(op->name).second)
      return refuse(std::string("operation '") + op->name + "' is declared twice");
    lib->operations_.push_back({op->name, op->fn, has_estimate ? op->estimate : nullptr});
  }
  lib->descriptor_ = d;
  lib->name_ = d->name;
  lib->version_ = d->version;

  const bool has_hooks =
      d->struct_size >= offsetof(ratchet_plugin_descriptor, shutdown) + sizeof(d->shutdown);
  if (has_hooks && d->init != nullptr) {
    const char* why = nullptr;
    try {
      why = d->init();
    } catch (...) {
      why = "init threw an exception";
    }
    if (why != nullptr) return refuse(std::string("its init hook failed: ") + why);
  }
  if (has_hooks) lib->shutdown_ = d->shutdown;
  return lib;
}

Library::~Library() {
  if (lib_.is_loaded()) {
    if (shutdown_ != nullptr) {
      try {
        shutdown_();
      } catch (...) {
        // A throwing shutdown hook is the plugin's bug; unloading goes on.
      }
    }
    lib_.unload();
    --g_live_libraries;
  }
  std::error_code ec;
  std::filesystem::remove(copy_, ec);
}

std::vector<std::string> Library::operations() const {
  std::vector<std::string> out;
  for (const auto& op : operations_) out.push_back(op.name);
  return out;
}

ratchet_operation_fn Library::find(std::string_view operation) const {
  for (const auto& op : operations_)
    if (op.name == operation) return op.fn;
  return nullptr;
}

ratchet_estimate_fn Library::find_estimate(std::string_view operation) const {
  for (const auto& op : operations_)
    if (op.name == operation) return op.estimate;
  return nullptr;
}

std::expected<std::shared_ptr<const Library>, LoadFailure> load_library(const fs::path& file,
                                                                        const fs::path& private_copy) {
  return LibraryLoader::load(file, private_copy);
}

std::size_t live_library_count() noexcept { return g_live_libraries.load(); }

}  // namespace ratchet::plugin_host
