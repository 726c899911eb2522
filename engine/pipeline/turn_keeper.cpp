#include "pipeline/turn_keeper.hpp"

#include <algorithm>
#include <optional>

namespace ratchet::pipeline {

TurnKeeper::TurnKeeper(std::shared_ptr<const Clock> clock) : clock_(std::move(clock)) {}

TurnKeeper::~TurnKeeper() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  // A queue may outlive its keeper: it must not poke it then.
  for (const auto& q : queues_) {
    if (auto held = q.lock()) held->on_waiting(nullptr);
  }
}

void TurnKeeper::watch(const std::shared_ptr<retry::TurnQueue>& queue) {
  {
    std::lock_guard lock(mu_);
    const bool known =
        std::any_of(queues_.begin(), queues_.end(), [&](const auto& q) { return q.lock() == queue; });
    if (known) return;
    queues_.push_back(queue);
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(std::move(stop)); });
  }
  queue->on_waiting([this] { poke(); });
  poke();
}

void TurnKeeper::on_round(std::function<void(TimePoint)> round) {
  std::lock_guard lock(mu_);
  round_ = std::move(round);
}

void TurnKeeper::poke() {
  std::lock_guard lock(mu_);
  interrupt_.request_stop();
}

void TurnKeeper::run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::shared_ptr<retry::TurnQueue>> live;
    std::stop_source sleep;
    std::function<void(TimePoint)> round;
    {
      std::lock_guard lock(mu_);
      std::erase_if(queues_, [](const auto& q) { return q.expired(); });
      for (const auto& q : queues_) {
        if (auto held = q.lock()) live.push_back(std::move(held));
      }
      // A poke from here on ends the sleep below at once.
      interrupt_ = std::stop_source();
      sleep = interrupt_;
      round = round_;
    }
    const TimePoint now = clock_->now();
    std::optional<TimePoint> next;
    for (const auto& q : live) {
      q->grant(now);
      if (auto at = q->next_grant()) next = next ? std::min(*next, *at) : *at;
    }
    live.clear();
    if (round) round(now);
    const TimePoint until = next ? std::min(*next, now + kMaxSleep) : now + std::chrono::hours(1);
    std::stop_callback on_stop(stop, [sleep]() mutable { sleep.request_stop(); });
    clock_->wait_until(until, sleep.get_token());
  }
}

}  // namespace ratchet::pipeline
