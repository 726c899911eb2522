// A StepCaller for tests: each plugin.operation answers with a scripted
// function, and every call is counted.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/step_caller.hpp"

namespace ratchet::testing {

class FakeCaller final : public runtime::StepCaller {
 public:
  using Script = std::function<runtime::CallOutcome(const runtime::StepCall&)>;

  void on(const std::string& op, Script script) {
    std::lock_guard lock(mu_);
    scripts_[op] = std::move(script);
  }

  runtime::CallOutcome call(const runtime::StepCall& c, std::stop_token) override {
    Script script;
    {
      std::lock_guard lock(mu_);
      ++calls_[c.step];
      calls_by_op_[c.plugin + "." + c.operation]++;
      last_args_[c.step] = c.args;
      last_keys_[c.step] = c.idempotency_key;
      auto it = scripts_.find(c.plugin + "." + c.operation);
      if (it == scripts_.end()) {
        return runtime::CallOutcome::failed(
            Error::not_found("no script for " + c.plugin + "." + c.operation));
      }
      script = it->second;
    }
    return script(c);
  }

  void set_backlog(Backlog backlog) override {
    std::lock_guard lock(mu_);
    backlog_ = std::move(backlog);
  }
  // What the engine's backlog says now; nullopt: it gave none.
  std::optional<std::int64_t> backlog() {
    std::lock_guard lock(mu_);
    if (!backlog_) return std::nullopt;
    return backlog_();
  }

  void forget(JobId job, int attempt) override {
    std::lock_guard lock(mu_);
    forgotten_.emplace_back(job, attempt);
  }

  // The (job, attempt) pairs whose kept steps the engine gave up, in order.
  std::vector<std::pair<JobId, int>> forgotten() {
    std::lock_guard lock(mu_);
    return forgotten_;
  }

  int calls(const std::string& step) {
    std::lock_guard lock(mu_);
    return calls_[step];
  }
  nlohmann::json last_args(const std::string& step) {
    std::lock_guard lock(mu_);
    return last_args_[step];
  }
  std::string last_key(const std::string& step) {
    std::lock_guard lock(mu_);
    return last_keys_[step];
  }

 private:
  std::mutex mu_;
  std::map<std::string, Script> scripts_;
  std::map<std::string, int> calls_;
  std::map<std::string, int> calls_by_op_;
  std::map<std::string, nlohmann::json> last_args_;
  std::map<std::string, std::string> last_keys_;
  std::vector<std::pair<JobId, int>> forgotten_;
  Backlog backlog_;
};

}  // namespace ratchet::testing
