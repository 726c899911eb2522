// Runs code with the process out of file descriptors (EMFILE), as a busy
// engine meets it: the soft limit lowered to the highest descriptor open,
// and every lower one taken, so the next open() fails. Both are given back
// afterwards. Nothing else may open files meanwhile: single-threaded parts
// of a test only.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace ratchet::testing {

template <typename F>
auto without_descriptors(F&& f) {
  rlimit saved{};
  if (::getrlimit(RLIMIT_NOFILE, &saved) != 0) throw std::runtime_error("getrlimit failed");
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(e.path().filename().string()));
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(highest + 1);
  if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) throw std::runtime_error("setrlimit failed");
  std::vector<int> fillers;  // every lower descriptor taken: the next open fails
  for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) fillers.push_back(fd);
  struct GiveBack {
    std::vector<int>& fillers;
    rlimit saved;
    ~GiveBack() {
      for (int fd : fillers) ::close(fd);
      (void)::setrlimit(RLIMIT_NOFILE, &saved);
    }
  } give_back{fillers, saved};
  return f();
}

}  // namespace ratchet::testing
