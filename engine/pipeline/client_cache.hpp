// One HTTP client per plugin, built from its call policy's timeouts and size
// bounds and kept while they stay the same, so a plugin's calls share its
// open connections. A reload that changes them makes the next call build a
// new client; calls in flight keep the one they hold, which ends with its
// last call.
//
// Thread-safety: client_for may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "config/spec.hpp"
#include "http/client.hpp"
#include "ratchet/status.hpp"

namespace ratchet::pipeline {

class ClientCache {
 public:
  // The client of `plugin` for `policy`, shared with the calls that hold it.
  [[nodiscard]] Result<std::shared_ptr<http::Client>> client_for(const std::string& plugin,
                                                                 const config::CallPolicy& policy);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<http::Client>> clients_;  // by plugin
};

}  // namespace ratchet::pipeline
