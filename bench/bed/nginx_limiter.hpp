// Debian's nginx as a rate limiter no one here wrote: limit_req in front of
// the mock portal, in a temp prefix on a free loopback port, stopped (and its
// access log complete) when dropped.
//
// Thread-safety: one thread owns it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "ratchet/status.hpp"

namespace ratchet::bench {

struct NginxOptions {
  int rate = 10;             // r/s
  int burst = 2;             // limit_req burst, nodelay
  bool retry_after = false;  // the 429 carries Retry-After: 1
};

// What nginx's access log says of a run.
struct NginxLog {
  std::map<int, std::int64_t> statuses;                 // answers by status
  std::chrono::system_clock::time_point first_arrival;  // of any request
  std::chrono::system_clock::time_point last_answer;    // of any request
};

class NginxLimiter {
 public:
  static constexpr const char* kProgram = "/usr/sbin/nginx";
  static bool installed();

  static Result<std::unique_ptr<NginxLimiter>> start(const std::filesystem::path& prefix, int upstream_port,
                                                     const NginxOptions& options);
  ~NginxLimiter();
  NginxLimiter(const NginxLimiter&) = delete;
  NginxLimiter& operator=(const NginxLimiter&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT"
  // Stops nginx (gracefully: the log is complete) and reads its log.
  Result<NginxLog> finish();

 private:
  NginxLimiter(std::filesystem::path prefix, int port, pid_t pid);
  void stop();

  std::filesystem::path prefix_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace ratchet::bench
