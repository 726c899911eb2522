#include "pipeline/client_cache.hpp"

#include <chrono>

namespace ratchet::pipeline {

Result<std::shared_ptr<http::Client>> ClientCache::client_for(const std::string& plugin,
                                                              const config::CallPolicy& policy) {
  http::ClientOptions options;
  options.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(policy.connect_timeout);
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(policy.timeout);
  options.max_response_bytes = policy.max_response_bytes;
  options.max_redirects = policy.max_redirects;
  std::lock_guard lock(mu_);
  if (auto it = clients_.find(plugin); it != clients_.end()) {
    const http::ClientOptions& held = it->second->options();
    if (held.connect_timeout == options.connect_timeout && held.timeout == options.timeout &&
        held.max_response_bytes == options.max_response_bytes &&
        held.max_redirects == options.max_redirects) {
      return it->second;  // unchanged: keep its open connections
    }
  }
  auto made = http::Client::create(options);
  if (!made) return fail(made.error().with_context("HTTP client of plugin " + plugin));
  std::shared_ptr<http::Client> client = std::move(*made);
  clients_[plugin] = client;
  return client;
}

}  // namespace ratchet::pipeline
