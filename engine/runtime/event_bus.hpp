// Delivers job events to the host's subscribers. Callbacks run on the thread
// that publishes, outside any lock, so a callback may subscribe or
// unsubscribe. Thread-safety: all members may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ratchet/job.hpp"

namespace ratchet::runtime {

class EventBus {
 public:
  using Callback = std::function<void(const JobEvent&)>;

  std::uint64_t subscribe(Callback cb) {
    std::lock_guard lock(mu_);
    subs_.emplace(++next_, std::make_shared<Callback>(std::move(cb)));
    return next_;
  }
  void unsubscribe(std::uint64_t id) {
    std::lock_guard lock(mu_);
    subs_.erase(id);
  }
  void publish(const JobEvent& e) const {
    std::vector<std::shared_ptr<Callback>> targets;
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, cb] : subs_) targets.push_back(cb);
    }
    for (const auto& cb : targets) (*cb)(e);
  }

 private:
  mutable std::mutex mu_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, std::shared_ptr<Callback>> subs_;
};

}  // namespace ratchet::runtime
