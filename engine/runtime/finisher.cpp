#include "runtime/finisher.hpp"

#include <memory>
#include <optional>

namespace ratchet::runtime {

Finisher::Finisher(const ExecutorEnv& env, HeldJobs& held, Dispatcher& dispatcher,
                   std::function<void()> on_job_done)
    : env_(env), held_(held), dispatcher_(dispatcher), on_job_done_(std::move(on_job_done)) {}

void Finisher::start() {
  {
    std::lock_guard lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { finisher_loop(); });
}

void Finisher::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Finisher::finish(ClaimKey key, Ending end) {
  if (end.run) {
    store::RunWrite run = std::move(*end.run);
    end.run.reset();
    const TimePoint lease_until = end.lease_until.value_or(TimePoint{});
    env_.run.store->write_run_async(
        std::move(run),
        [this, key, end = std::move(end)](Result<store::LeaseWrite> written) mutable {
          // As below: handed over to the finisher thread.
          std::lock_guard lock(mu_);
          queue_.emplace_back([this, key, written = std::move(written), end = std::move(end)] {
            finished(key, end, written);
          });
          cv_.notify_one();
        },
        lease_until);
    return;
  }
  if (!end.write) {
    finished(key, end, store::LeaseWrite{});
    return;
  }
  auto written = std::make_shared<store::LeaseWrite>();
  auto write = std::move(end.write);
  const std::optional<TimePoint> lease_until = end.lease_until;
  env_.run.store->write_async(
      [written, write = std::move(write)](store::JobStore& s) { *written = write(s); },
      [this, key, written, end = std::move(end)](std::optional<Error> error) mutable {
        // On the writer thread: hand over, never run host callbacks here.
        // Notified under the lock: once the finisher has run this, stop()
        // may destroy the scheduler.
        std::lock_guard lock(mu_);
        queue_.emplace_back([this, key, written, error = std::move(error), end = std::move(end)] {
          Result<store::LeaseWrite> w = *written;
          if (error) w = fail(*error);
          finished(key, end, w);
        });
        cv_.notify_one();
      },
      lease_until);
}

void Finisher::finisher_loop() {
  std::deque<std::function<void()>> batch;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      batch.swap(queue_);
    }
    for (auto& f : batch) f();
    batch.clear();
  }
}

void Finisher::finished(ClaimKey key, const Ending& end, const Result<store::LeaseWrite>& written) {
  if (end.after) end.after(written);
  if (end.parked_until && written && written->held) dispatcher_.wake_at(*end.parked_until);
  bool idle = false;
  bool wanted = false;
  {
    std::lock_guard lock(held_.mu);
    held_.finishing.erase(key);
    --held_.running;
    idle = held_.running == 0 && held_.ready.empty();
    wanted = held_.claim_wanted();
  }
  if (wanted) held_.room_cv.notify_one();
  held_.idle_cv.notify_all();
  // Whoever drains looks again once this engine has nothing left in hand
  // (while it has, some job of its types is still pending).
  if (idle && on_job_done_) on_job_done_();
}

}  // namespace ratchet::runtime
