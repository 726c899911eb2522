// Concurrency cap: at most `max` calls of a plugin (or operation) in flight.
//
// A Permit is RAII: the call holds it from start to reply and it is released
// when the Permit is destroyed. A caller who finds no permit free does not
// wait on a thread: it parks and comes back when told through the release
// listener (or at its next poll). Permits are not handed out in request order.
//
// Thread-safety: safe to share between threads. The limiter must outlive its
// permits; create it with make() (permits keep it alive through a shared_ptr).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace ratchet::limit {

class ConcurrencyLimiter;

class Permit {
 public:
  Permit() = default;
  Permit(Permit&& other) noexcept : owner_(std::move(other.owner_)) {}
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { release(); }

  bool held() const { return owner_ != nullptr; }
  void release();

 private:
  friend class ConcurrencyLimiter;
  explicit Permit(std::shared_ptr<ConcurrencyLimiter> owner) : owner_(std::move(owner)) {}
  std::shared_ptr<ConcurrencyLimiter> owner_;
};

class ConcurrencyLimiter : public std::enable_shared_from_this<ConcurrencyLimiter> {
 public:
  static std::shared_ptr<ConcurrencyLimiter> make(int max);

  // A permit if fewer than max are held, else nothing.
  std::optional<Permit> try_acquire();

  int in_use() const;
  int max() const { return max_; }

  // Called (outside the limiter's lock, on the releasing thread) after every
  // release, so the engine can wake a job parked for a permit. Replaces any
  // previous listener; the listener must not block.
  void on_release(std::function<void()> listener);

 private:
  explicit ConcurrencyLimiter(int max) : max_(max) {}
  friend class Permit;
  void release_one();

  const int max_;
  mutable std::mutex mu_;
  int in_use_ = 0;
  std::shared_ptr<std::function<void()>> listener_;
};

}  // namespace ratchet::limit
