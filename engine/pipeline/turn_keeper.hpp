// Grants the turns nobody asks for. A TurnQueue grants slots at most its
// horizon ahead (retry/turn_queue.hpp), so while steps wait for their turns
// in it, parked, something must call grant() as the slots come. The keeper
// is one thread of a step caller, started when a step first waits for a
// turn: it sleeps until the earliest next_grant() of the queues it watches,
// or until a queue that had nobody waiting gains a step. It sleeps at most
// kMaxSleep while steps wait, because a learned pace that speeds up, or a
// slot given back, makes room sooner than next_grant() said.
//
// Thread-safety: every method may be called from any thread. The thread
// stops and is joined when the keeper is destroyed, so the wake callbacks
// it runs (through grant()) never outlive their owner if it is destroyed
// before what the callbacks use.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "ratchet/clock.hpp"
#include "retry/turn_queue.hpp"

namespace ratchet::pipeline {

class TurnKeeper {
 public:
  static constexpr Duration kMaxSleep = std::chrono::milliseconds(200);

  explicit TurnKeeper(std::shared_ptr<const Clock> clock);
  ~TurnKeeper();
  TurnKeeper(const TurnKeeper&) = delete;
  TurnKeeper& operator=(const TurnKeeper&) = delete;

  // Grants the turns of `queue` from now on (again: nothing changes).
  void watch(const std::shared_ptr<retry::TurnQueue>& queue);
  // Called by the keeper's thread after every round of grants (at least
  // every kMaxSleep while steps wait), with the time it granted at.
  void on_round(std::function<void(TimePoint)> round);

 private:
  void run(std::stop_token stop);
  void poke();

  std::shared_ptr<const Clock> clock_;
  std::mutex mu_;
  std::vector<std::weak_ptr<retry::TurnQueue>> queues_;
  std::stop_source interrupt_;  // ends the keeper's current sleep
  std::function<void(TimePoint)> round_;
  std::jthread thread_;  // last: stopped before the rest goes
};

}  // namespace ratchet::pipeline
