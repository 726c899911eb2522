#include "limit/concurrency.hpp"

#include <algorithm>

namespace ratchet::limit {

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::move(other.owner_);
  }
  return *this;
}

void Permit::release() {
  if (owner_) {
    auto owner = std::move(owner_);
    owner_.reset();
    owner->release_one();
  }
}

std::shared_ptr<ConcurrencyLimiter> ConcurrencyLimiter::make(int max) {
  return std::shared_ptr<ConcurrencyLimiter>(new ConcurrencyLimiter(std::max(max, 1)));
}

std::optional<Permit> ConcurrencyLimiter::try_acquire() {
  std::lock_guard lock(mu_);
  if (in_use_ >= max_) return std::nullopt;
  ++in_use_;
  return Permit(shared_from_this());
}

int ConcurrencyLimiter::in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

void ConcurrencyLimiter::on_release(std::function<void()> listener) {
  auto l = listener ? std::make_shared<std::function<void()>>(std::move(listener)) : nullptr;
  std::lock_guard lock(mu_);
  listener_ = std::move(l);
}

void ConcurrencyLimiter::release_one() {
  std::shared_ptr<std::function<void()>> listener;
  {
    std::lock_guard lock(mu_);
    --in_use_;
    listener = listener_;
  }
  if (listener) (*listener)();
}

}  // namespace ratchet::limit
