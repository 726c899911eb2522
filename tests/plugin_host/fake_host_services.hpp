// An in-memory HostServices for plugin tests: no network. Answers HTTP from
// canned results per URL (404 otherwise) or from a handler, records every
// request and log line, and can be cancelled.
//
// Thread-safety: every method locks; the plugin's thread and the test's
// thread may use it at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plugin_host/host_services.hpp"

namespace ratchet::testing {

using plugin_host::HttpRequest;
using plugin_host::HttpResult;
using plugin_host::LogLevel;

class FakeHostServices final : public plugin_host::HostServices {
 public:
  // Answers requests to `url` with `result`.
  void respond(std::string url, HttpResult result) {
    std::lock_guard lock(mu_);
    canned_[std::move(url)] = std::move(result);
  }
  // A 2xx JSON answer to `url`.
  void respond_json(std::string url, std::string body, int status = 200) {
    HttpResult r;
    r.status = status;
    r.body = std::move(body);
    r.headers = {{"Content-Type", "application/json"}};
    respond(std::move(url), std::move(r));
  }
  // Answers every request not canned; runs on the plugin's thread.
  void set_handler(std::function<HttpResult(const HttpRequest&)> handler) {
    std::lock_guard lock(mu_);
    handler_ = std::move(handler);
  }

  HttpResult http(std::string_view, const HttpRequest& request) override {
    std::function<HttpResult(const HttpRequest&)> handler;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
      if (auto it = canned_.find(request.url); it != canned_.end()) return it->second;
      handler = handler_;
    }
    if (handler) return handler(request);
    HttpResult r;
    r.status = 404;
    r.body = "no canned answer for " + request.url;
    return r;
  }
  void log(std::string_view plugin, LogLevel, std::string_view message) override {
    std::lock_guard lock(mu_);
    logs_.push_back(std::string(plugin) + ": " + std::string(message));
  }
  bool cancelled() override { return cancelled_.load(); }
  void report_cost(std::string_view, std::int64_t units) override {
    std::lock_guard lock(mu_);
    costs_.push_back(units);
  }

  void cancel() { cancelled_.store(true); }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::vector<std::string> logs() const {
    std::lock_guard lock(mu_);
    return logs_;
  }
  // The costs the plugin reported (report_cost), in order.
  std::vector<std::int64_t> costs() const {
    std::lock_guard lock(mu_);
    return costs_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, HttpResult> canned_;
  std::function<HttpResult(const HttpRequest&)> handler_;
  std::vector<HttpRequest> requests_;
  std::vector<std::string> logs_;
  std::vector<std::int64_t> costs_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace ratchet::testing
