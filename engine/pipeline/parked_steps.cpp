#include "pipeline/parked_steps.hpp"

#include <algorithm>
#include <limits>

namespace ratchet::pipeline {

ParkedSteps::Entry::Entry(std::string plugin_name, TimePoint now)
    : call(now), plugin(std::move(plugin_name)), started(now) {}

std::shared_ptr<ParkedSteps::Entry> ParkedSteps::come_back(const Key& key, const std::string& plugin,
                                                           TimePoint now) {
  auto& slot = steps_[key];
  if (!slot || slot->in_hand) slot = std::make_shared<Entry>(plugin, now);
  slot->in_hand = true;
  slot->park = 0;
  slot->awaits_release = false;
  slot->for_turn = false;
  slot->park_committed = false;
  slot->woken = false;
  return slot;
}

void ParkedSteps::park(const Key& key, const std::shared_ptr<Entry>& entry) {
  entry->in_hand = false;
  entry->park = ++parks_made_;
  steps_.try_emplace(key, entry);
}

bool ParkedSteps::park_for_release(const Key& key, const std::shared_ptr<Entry>& entry,
                                   const std::string& plugin, bool for_permit, std::uint64_t ended_before) {
  ReleaseWaiters& waiters = waiters_[plugin];
  if (waiters.ended != ended_before) return false;
  auto& queue = for_permit ? waiters.permit : waiters.probe;
  queue.emplace_back(key, entry);
  entry->awaits_release = true;
  entry->park_committed = false;
  entry->woken = false;
  park(key, entry);
  return true;
}

void ParkedSteps::park_for_turn(const Key& key, const std::shared_ptr<Entry>& entry) {
  entry->awaits_release = true;
  entry->for_turn = true;
  entry->park_committed = false;
  entry->woken = false;
  park(key, entry);
}

bool ParkedSteps::wake(const Key& key, const std::shared_ptr<Entry>& entry, TimePoint at) {
  if (!entry->awaits_release || entry->woken) return false;
  auto it = steps_.find(key);
  if (it == steps_.end() || it->second != entry) return false;
  entry->woken = true;
  entry->resume_at = at;
  return entry->park_committed;
}

void ParkedSteps::remove(const Key& key, const std::shared_ptr<Entry>& entry) {
  entry->in_hand = false;
  if (auto it = steps_.find(key); it != steps_.end() && it->second == entry) steps_.erase(it);
}

template <typename Pred>
ParkedSteps::Entries ParkedSteps::take_if(JobId job, int attempt, Pred drop) {
  Entries dropped;
  auto it = steps_.lower_bound(Key{job, std::string(), std::numeric_limits<int>::min()});
  while (it != steps_.end() && std::get<0>(it->first) == job) {
    if (std::get<2>(it->first) <= attempt && drop(*it->second)) {
      dropped.push_back(std::move(it->second));
      it = steps_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

ParkedSteps::Entries ParkedSteps::take(JobId job, int attempt) {
  return take_if(job, attempt, [](const Entry&) { return true; });
}

ParkedSteps::Entries ParkedSteps::take_parked(JobId job, int attempt, std::uint64_t park) {
  return take_if(job, attempt, [park](const Entry& e) { return e.park != 0 && e.park <= park; });
}

std::uint64_t ParkedSteps::calls_ended(const std::string& plugin) { return waiters_[plugin].ended; }

std::vector<std::pair<JobId, int>> ParkedSteps::end_call(const std::string& plugin) {
  std::vector<std::pair<JobId, int>> out;
  auto found = waiters_.find(plugin);
  if (found == waiters_.end()) return out;
  ReleaseWaiters& w = found->second;
  ++w.ended;
  // Marks a waiter woken; false when it no longer waits (came back, forgotten).
  auto wake = [&](const std::pair<Key, std::weak_ptr<Entry>>& waiter) {
    auto entry = waiter.second.lock();
    if (!entry || !entry->awaits_release || entry->woken) return false;
    auto it = steps_.find(waiter.first);
    if (it == steps_.end() || it->second != entry) return false;
    entry->woken = true;
    entry->resume_at = TimePoint{};
    if (entry->park_committed) out.emplace_back(std::get<0>(waiter.first), std::get<2>(waiter.first));
    return true;
  };
  while (!w.permit.empty()) {
    auto waiter = std::move(w.permit.front());
    w.permit.pop_front();
    if (wake(waiter)) break;  // one freed permit, one step resumed
  }
  for (const auto& waiter : w.probe) wake(waiter);
  w.probe.clear();
  return out;
}

std::optional<TimePoint> ParkedSteps::park_committed(JobId job, int attempt) {
  std::optional<TimePoint> resume;
  auto it = steps_.lower_bound(Key{job, std::string(), std::numeric_limits<int>::min()});
  for (; it != steps_.end() && std::get<0>(it->first) == job; ++it) {
    Entry& e = *it->second;
    if (std::get<2>(it->first) != attempt || !e.awaits_release || e.park == 0) continue;
    e.park_committed = true;
    if (e.woken) resume = resume ? std::min(*resume, e.resume_at) : e.resume_at;
  }
  return resume;
}

std::vector<std::pair<JobId, int>> ParkedSteps::waiting_for_turns() const {
  std::vector<std::pair<JobId, int>> out;
  for (const auto& [key, entry] : steps_) {
    if (entry->for_turn && entry->park != 0 && entry->park_committed && !entry->woken)
      out.emplace_back(std::get<0>(key), std::get<2>(key));
  }
  return out;
}

std::vector<ParkedJob> ParkedSteps::parked_jobs() const {
  std::vector<ParkedJob> out;
  std::size_t first_of_job = 0;
  for (const auto& [key, entry] : steps_) {
    if (entry->park == 0) continue;
    const auto& [job, step, attempt] = key;
    // Keys order a job's steps by name before attempt, so its attempts
    // interleave, but all of them come together.
    if (out.empty() || out.back().job != job) first_of_job = out.size();
    auto same = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first_of_job), out.end(),
                             [&](const ParkedJob& p) { return p.attempt == attempt; });
    if (same == out.end()) {
      out.push_back({job, attempt, entry->park});
    } else {
      same->park = std::max(same->park, entry->park);
    }
  }
  return out;
}

}  // namespace ratchet::pipeline
