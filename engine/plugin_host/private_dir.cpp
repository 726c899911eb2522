#include "plugin_host/private_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

namespace ratchet::plugin_host {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "ratchet-plugins-";
constexpr const char* kOwnerFile = "owner";

struct Owner {
  std::string boot;
  std::string pid_ns;
  long pid = 0;
  unsigned long long start = 0;  // clock ticks after boot (field 22 of /proc/PID/stat)

  bool operator==(const Owner&) const = default;
};

std::string read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string pid_namespace() {
  std::error_code ec;
  const fs::path link = fs::read_symlink("/proc/self/ns/pid", ec);
  return ec ? std::string() : link.string();
}

// The start time of `pid`, or nullopt when no such process exists.
std::optional<unsigned long long> start_time_of(long pid) {
  const std::string stat = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  // The command name (field 2) may hold spaces and parentheses: the fields
  // after it start after its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long start = 0;
  if (!(rest >> start)) return std::nullopt;
  return start;
}

Owner this_process() {
  Owner o;
  // "-" for what cannot be read, so the owner file always has four fields.
  o.boot = read_first_line("/proc/sys/kernel/random/boot_id");
  if (o.boot.empty()) o.boot = "-";
  o.pid_ns = pid_namespace();
  if (o.pid_ns.empty()) o.pid_ns = "-";
  o.pid = static_cast<long>(::getpid());
  o.start = start_time_of(o.pid).value_or(0);
  return o;
}

std::optional<Owner> read_owner(const fs::path& dir) {
  std::ifstream in(dir / kOwnerFile);
  Owner o;
  if (!(in >> o.boot >> o.pid_ns >> o.pid >> o.start)) return std::nullopt;
  return o;
}

enum class Verdict { kGone, kAlive, kUnknown };

Verdict judge(const Owner& owner, const Owner& self) {
  if (owner.boot != self.boot && owner.boot != "-" && self.boot != "-") return Verdict::kGone;
  if (owner.pid_ns != self.pid_ns) return Verdict::kUnknown;
  const auto start = start_time_of(owner.pid);
  return start && *start == owner.start ? Verdict::kAlive : Verdict::kGone;
}

}  // namespace

Result<fs::path> make_private_dir(const fs::path& parent) {
  // A fresh name of its own: one made from the pid could be the leftover of
  // an earlier process with the same pid.
  std::string name = (parent / (std::string(kPrefix) + "XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr) {
    return fail(Error::io("cannot create a private plugin directory " + name + ": " + std::strerror(errno) +
                          " (check TMPDIR)"));
  }
  const fs::path dir = name;
  const Owner self = this_process();
  {
    std::ofstream out(dir / "owner.tmp", std::ios::trunc);
    out << self.boot << ' ' << self.pid_ns << ' ' << self.pid << ' ' << self.start << '\n';
    if (!out.flush()) {
      std::error_code ec;
      fs::remove_all(dir, ec);
      return fail(Error::io("cannot write the owner of the private plugin directory " + name +
                            " (disk full? check TMPDIR)"));
    }
  }
  std::error_code ec;
  fs::rename(dir / "owner.tmp", dir / kOwnerFile, ec);
  if (ec) {
    fs::remove_all(dir, ec);
    return fail(
        Error::io("cannot write the owner of the private plugin directory " + name + ": " + ec.message()));
  }
  return dir;
}

SweepReport sweep_private_dirs(const fs::path& parent, std::chrono::seconds legacy_age) {
  SweepReport report;
  const Owner self = this_process();
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    Verdict v = Verdict::kUnknown;
    if (auto owner = read_owner(it->path())) {
      v = judge(*owner, self);
    } else {
      std::error_code tec;
      const auto written = fs::last_write_time(it->path(), tec);
      if (!tec && now - written > legacy_age) v = Verdict::kGone;
    }
    if (v != Verdict::kGone) {
      ++report.kept;
      continue;
    }
    std::error_code rec;
    fs::remove_all(it->path(), rec);
    if (!rec) ++report.removed;
  }
  return report;
}

}  // namespace ratchet::plugin_host
