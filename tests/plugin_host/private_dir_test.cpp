// The private folders of plugin copies: a process killed with SIGKILL
// cannot remove its own, so the next host removes it, and never the folder
// of a process that still runs.
#include "plugin_host/private_dir.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "plugin_host/plugin_host.hpp"
#include "temp_dir.hpp"
#include "test_folder.hpp"

namespace ratchet::plugin_host {
namespace {

namespace fs = std::filesystem;
using ratchet::testing::TempDir;

// A child process that makes a private folder under `parent`, writes its
// path to `report`, and waits to be killed.
pid_t spawn_owner(const fs::path& parent, const fs::path& report) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto dir = make_private_dir(parent);
    {
      std::ofstream out(report);
      out << (dir ? dir->string() : std::string("error"));
    }
    for (;;) ::pause();
  }
  return pid;
}

fs::path wait_for_report(const fs::path& report) {
  for (int i = 0; i < 5000; ++i) {
    std::ifstream in(report);
    std::string line;
    if (std::getline(in, line) && !line.empty()) return line;
    ::usleep(1000);
  }
  return {};
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(PrivateDir, FolderOfAProcessKilledWithSigkill_IsRemovedByTheNextSweep) {
  TempDir tmp;
  const pid_t pid = spawn_owner(tmp.path(), tmp.file("report"));
  const fs::path dir = wait_for_report(tmp.file("report"));
  ASSERT_FALSE(dir.empty());
  ASSERT_NE(dir.string(), "error");
  std::ofstream(dir / "imdb.1.so") << "a copied plugin";
  kill_and_reap(pid);
  ASSERT_TRUE(fs::exists(dir / "imdb.1.so")) << "SIGKILL leaves the folder behind";

  const SweepReport r = sweep_private_dirs(tmp.path());
  EXPECT_EQ(r.removed, 1);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(PrivateDir, FolderOfARunningProcess_IsKept) {
  TempDir tmp;
  const pid_t pid = spawn_owner(tmp.path(), tmp.file("report"));
  const fs::path other = wait_for_report(tmp.file("report"));
  ASSERT_FALSE(other.empty());
  auto mine = make_private_dir(tmp.path());
  ASSERT_TRUE(mine.has_value()) << mine.error().to_string();

  const SweepReport r = sweep_private_dirs(tmp.path());
  EXPECT_EQ(r.removed, 0);
  EXPECT_EQ(r.kept, 2);
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(*mine));
  kill_and_reap(pid);
}

TEST(PrivateDir, PidReusedByAnotherProcess_DoesNotKeepTheFolder) {
  TempDir tmp;
  auto dir = make_private_dir(tmp.path());
  ASSERT_TRUE(dir.has_value());
  // This process's pid with another start time: the owner was an earlier
  // process that had the same pid.
  std::ifstream in(*dir / "owner");
  std::string boot, ns, pid, start;
  in >> boot >> ns >> pid >> start;
  in.close();
  std::ofstream(*dir / "owner", std::ios::trunc) << boot << ' ' << ns << ' ' << pid << ' ' << start << "1\n";

  EXPECT_EQ(sweep_private_dirs(tmp.path()).removed, 1);
  EXPECT_FALSE(fs::exists(*dir));
}

TEST(PrivateDir, FolderOfAnotherBoot_IsRemovedOfAnotherPidNamespace_IsKept) {
  TempDir tmp;
  const fs::path boot = tmp.path() / "ratchet-plugins-boot01";
  const fs::path ns = tmp.path() / "ratchet-plugins-ns0001";
  fs::create_directories(boot);
  fs::create_directories(ns);
  std::ofstream(boot / "owner") << "00000000-0000-0000-0000-000000000000 pid:[1] 1 1\n";
  std::string my_boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> my_boot;
  std::ofstream(ns / "owner") << my_boot << " pid:[1] 1 1\n";

  const SweepReport r = sweep_private_dirs(tmp.path());
  EXPECT_EQ(r.removed, 1);
  EXPECT_FALSE(fs::exists(boot));
  EXPECT_TRUE(fs::exists(ns)) << "a container's process cannot be judged from here";
}

TEST(PrivateDir, FolderWithoutOwner_IsRemovedOnlyOnceOld) {
  TempDir tmp;
  const fs::path fresh = tmp.path() / "ratchet-plugins-fresh1";
  const fs::path old = tmp.path() / "ratchet-plugins-old001";
  const fs::path other = tmp.path() / "something-else";
  for (const auto& d : {fresh, old, other}) fs::create_directories(d);
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(1));
  fs::last_write_time(other, fs::file_time_type::clock::now() - std::chrono::hours(1));

  const SweepReport r = sweep_private_dirs(tmp.path(), std::chrono::minutes(10));
  EXPECT_EQ(r.removed, 1);
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(fresh)) << "may be a folder whose owner is writing its owner file now";
  EXPECT_TRUE(fs::exists(other)) << "not ratchet's";
}

TEST(PrivateDir, OpeningAHost_RemovesTheFoldersOfKilledProcesses) {
  TempDir tmp;
  const pid_t pid = spawn_owner(tmp.path(), tmp.file("report"));
  const fs::path dead = wait_for_report(tmp.file("report"));
  ASSERT_FALSE(dead.empty());
  kill_and_reap(pid);

  const char* saved = std::getenv("TMPDIR");
  const std::optional<std::string> previous = saved ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  {
    ratchet::testing::TestFolder plugins;
    PluginHostOptions o;
    o.folder = plugins.path();
    auto host = PluginHost::open(o);
    ASSERT_TRUE(host.has_value()) << host.error().to_string();
    EXPECT_FALSE(fs::exists(dead));
    int own = 0;
    for (const auto& e : fs::directory_iterator(tmp.path())) {
      own += e.path().filename().string().starts_with("ratchet-plugins-") ? 1 : 0;
    }
    EXPECT_EQ(own, 1) << "only the host's own folder is left";
  }
  if (previous) {
    ::setenv("TMPDIR", previous->c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace ratchet::plugin_host
