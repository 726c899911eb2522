// Turns on the limits that keys share. With keyed limits, slots in the
// limits the keys share (the plugin's unkeyed limits, and its learned pace
// for keys without one of their own) are granted in turns between the keys
// with a step waiting, not in the order asked: one account with a thousand
// calls queued does not make an account with two wait behind them.
//
// Turns are by weight (stride scheduling): each key has a pass, a grant goes
// to the waiting key with the lowest, and raises it by 1/weight. While two
// keys wait, one of weight 3 gets three slots to the other's one; keys of
// equal weight alternate. A key that starts waiting joins at the pass of the
// latest grant, so time spent idle banks no turns, and none starves: every
// waiting key's pass is reached within (keys waiting) grants of weight 1.
//
// A step asks as soon as it arrives, for a slot in every limit of its call
// (its keys' own and the shared ones): the queue grants the whole slot,
// so a step waits in one park for its keys' limits and its turn together.
// A key takes part in the turns while its first step's own limits allow
// it within the horizon; its steps are granted in the order they asked.
//
// Only slots at most `horizon` ahead are granted. A slot granted far ahead
// would fix the order before keys that start waiting later had their turn,
// so a step not granted waits in its key's queue, holding no slot, and is
// woken (Turn::wake) when its turn is granted; the step then finds its slot
// at most about `horizon` ahead and waits for it in place. grant() is
// driven by whoever asks and by a keeper that calls it at next_grant()
// (pipeline/turn_keeper.hpp).
//
// Costs in flight. A step whose cost is learned from replies is admitted at
// the least its operation's calls cost, and corrected when its reply says
// what it cost. Granted at that least, a whole window's worth of calls
// could be granted before the first of them is corrected, and the
// overdraft of their corrections would move the later ones on (a second
// park each) or reach the server. So each such grant also counts what the
// call is expected to cost beyond its slot (UnitsInFlight), until its
// reply comes, and a step is granted only when the limits have room for
// its slot and for what the calls granted before it may still add.
//
// Between processes. When the limits the keys share are kept in a shared
// database (scope = "database"), the processes sharing it take turns too
// (limit/turn_shares.hpp, share_with): a process grants the next slot only
// when its turn comes, and its turns come in proportion to the weight of
// the keys it has waiting. So every key gets its share of the limit
// whichever process holds its steps, not each process an equal share.
//
// Thread-safety: every method may be called from any thread; wake callbacks
// run without the queue's lock held. A Turn belongs to one step.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/container/btree_set.h>
#include <absl/container/inlined_vector.h>
#include <absl/container/node_hash_map.h>

#include "limit/limiter.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/turn_shares.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::retry {

// The units that calls granted in turn may still add to the limits beyond
// their slots (see "Costs in flight"), shared by an operation's steps.
class UnitsInFlight {
 public:
  std::int64_t units() const { return units_.load(std::memory_order_acquire); }

  // Counts `units` while it lives (moved, the count goes with it).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : owner_(std::move(other.owner_)), units_(std::exchange(other.units_, 0)) {}
    Hold& operator=(Hold&& other) noexcept {
      if (this != &other) {
        release();
        owner_ = std::move(other.owner_);
        units_ = std::exchange(other.units_, 0);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { release(); }
    void release() {
      if (owner_ && units_ > 0) owner_->units_.fetch_sub(units_, std::memory_order_acq_rel);
      owner_.reset();
      units_ = 0;
    }

   private:
    friend class UnitsInFlight;
    std::shared_ptr<UnitsInFlight> owner_;
    std::int64_t units_ = 0;
  };
  static Hold hold(const std::shared_ptr<UnitsInFlight>& self, std::int64_t units) {
    Hold h;
    if (!self || units <= 0) return h;
    self->units_.fetch_add(units, std::memory_order_acq_rel);
    h.owner_ = self;
    h.units_ = units;
    return h;
  }

 private:
  std::atomic<std::int64_t> units_{0};
};

// One step's place in its key's queue, kept by its CallState across parks.
class Turn {
 public:
  bool granted() const { return granted_.load(std::memory_order_acquire); }
  TimePoint asked() const { return asked_; }

 private:
  friend class TurnQueue;
  std::string key_;
  double stride_ = 1.0;
  std::vector<std::shared_ptr<limit::Limiter>> limiters_;  // all of its call's, in stack order
  std::vector<std::shared_ptr<limit::Limiter>> own_;       // its keys' (a part of limiters_)
  std::vector<std::shared_ptr<limit::Limiter>> shared_;    // the rest
  std::int64_t units_ = 1;
  std::shared_ptr<UnitsInFlight> in_flight_;  // see Ask
  std::int64_t excess_ = 0;
  UnitsInFlight::Hold hold_;  // its excess, from its grant until its step takes it
  TimePoint asked_{};
  std::function<void(TimePoint)> wake_;
  // Guarded by the queue's lock.
  bool queued_ = false;
  limit::Reservation slot_;
  std::optional<Error> error_;
  std::atomic<bool> granted_{false};
};

class TurnQueue {
 public:
  static constexpr double kMaxWeight = 1000;

  explicit TurnQueue(Duration horizon);

  struct Ask {
    std::string key;
    double weight = 1;  // 1 to kMaxWeight
    // Every limiter of the call, in the order of its stack; those from
    // own_first on, own_count of them, are its keys' own.
    std::vector<std::shared_ptr<limit::Limiter>> limiters;
    std::size_t own_first = 0;
    std::size_t own_count = 0;
    std::int64_t units = 1;
    // Called once when a turn queued here is granted, with its slot's time.
    std::function<void(TimePoint)> wake;
    // A call whose cost is learned from replies ("Costs in flight"): it is
    // granted only with room beside its slot for the units `in_flight`
    // counts, and once granted counts `excess` there itself, held by
    // `*adopt` when its step takes the slot (until its reply comes).
    std::shared_ptr<UnitsInFlight> in_flight;
    std::int64_t excess = 0;
    UnitsInFlight::Hold* adopt = nullptr;
  };
  // The step's slot in all of `ask.limiters`, when its turn has come (now,
  // or granted since it asked; the slot is then taken out of `turn`).
  // nullopt: it waits in its key's queue, and `ask.wake` is called when its
  // turn is granted. `turn` is made on the first ask; a turn asked again
  // for other limiters or units (a reload, a new estimate) goes to the end
  // of its key's queue. Turns of other keys granted meanwhile are woken.
  [[nodiscard]] Result<std::optional<limit::Reservation>> ask(std::shared_ptr<Turn>& turn, Ask ask,
                                                              TimePoint now);

  // Grants every slot that comes within the horizon of `now`, in turns, and
  // wakes the steps granted. Returns how many were granted.
  std::size_t grant(TimePoint now);

  // When grant() may next grant a slot; nullopt: no step waits.
  std::optional<TimePoint> next_grant() const;

  // A generous time by which a step waiting now should have had its turn:
  // for the park's fallback wake-up, should no grant wake it first.
  TimePoint fallback(TimePoint now) const;
  // The soonest a step waiting now could have its slot: the slot of the
  // next grant (now when none is due).
  TimePoint soonest(TimePoint now) const;

  // Called (without the lock) when a step starts waiting and nothing was
  // waiting before: the keeper then calls grant() at next_grant().
  void on_waiting(std::function<void()> notify);

  std::size_t waiting() const;

  // How many more calls may come than wait here: the jobs the engine holds
  // that no worker runs yet, and more when its last claim found the
  // database fuller than it could take. Told to the limits with the count
  // that waits (Limiter::waiting), so a learned pace does not take a run's
  // steady stream for its end. Empty: none. Called under the queue's lock:
  // it must not block.
  using Backlog = std::function<std::int64_t()>;
  void set_backlog(Backlog backlog);

  // Takes turns with the other processes through `shares` from now on
  // (null: alone again).
  void share_with(std::shared_ptr<limit::TurnShares> shares);

  // While another process has the turn, a process asks again this often.
  static constexpr std::int64_t kSharePollUs = 25'000;
  // A process that found itself alone in the shared turns grants without
  // asking the database again for this long (a newcomer waits that much
  // longer for its first turn; a call each would be a transaction each).
  static constexpr std::int64_t kAloneUs = 50'000;
  // While the costs of calls in flight may take the room, a grant is
  // tried again this often (their replies correct the limits meanwhile).
  static constexpr std::int64_t kInFlightPollUs = 5'000;

 private:
  // A key's steps in the order they asked: a vector holding one step in
  // place, and the index of the first (a std::deque takes half a kilobyte
  // for one step, and there may be 100,000 keys with one step each).
  // Popping is amortised O(1).
  class Fifo {
   public:
    bool empty() const { return head_ == items_.size(); }
    std::size_t size() const { return items_.size() - head_; }  // counting steps gone, not yet dropped
    std::weak_ptr<Turn>& front() { return items_[head_]; }
    void push_back(std::weak_ptr<Turn> turn) { items_.push_back(std::move(turn)); }
    void pop_front() {
      items_[head_++].reset();
      if (head_ == items_.size()) {
        items_.clear();
        head_ = 0;
      } else if (head_ >= 32 && 2 * head_ >= items_.size()) {
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
    }

   private:
    absl::InlinedVector<std::weak_ptr<Turn>, 1> items_;
    std::uint32_t head_ = 0;
  };
  // 56 bytes: `where` and `weight` take the queue's tail padding.
  struct KeyState {
    enum class Where : std::uint8_t { kIdle, kActive, kWaking };
    [[no_unique_address]] Fifo queue;
    Where where = Where::kIdle;
    std::uint16_t weight = 0;  // while active: its first step's weight, in 1/kWeightScale
    double pass = 0;
    std::uint64_t order = 0;     // ties in active_ and waking_: the key that joined first
    std::int64_t waking_at = 0;  // its entry in waking_
  };
  static_assert(sizeof(KeyState) <= 56, "a key's state grows with every key a run meets");
  // Keys by name; a node each, so that active_ and waking_ name a key by
  // the address of its entry rather than by a copy of its name.
  using Keys = absl::node_hash_map<std::string, KeyState>;
  using Entry = Keys::value_type;
  struct Wake {
    const Turn* turn;
    std::function<void(TimePoint)> wake;
    TimePoint at;
  };
  using Woken = std::vector<Wake>;

  // Need mu_.
  void enqueue(const std::shared_ptr<Turn>& turn, std::int64_t now_us);
  // The key's first step still queued (the ones before it are dropped).
  std::shared_ptr<Turn> head_of(KeyState& ks);
  // Files the key by its first step: active_ when its own limits allow it
  // within the horizon, waking_ when later, nowhere when none is queued.
  void place(Entry& key, std::int64_t now_us);
  // When the keys' own limits allow `turn`'s call (now_us on an error: the
  // grant meets it again and fails the step with it).
  static std::int64_t ready_us(const Turn& turn, std::int64_t now_us);
  void unplace(Entry& key);
  std::size_t grant_locked(std::int64_t now_us, Woken& woken);
  // Whether this process may grant the slot at `at_us` now (shares_);
  // `stays`: keys still wait here after it.
  bool my_turn(std::int64_t at_us, std::int64_t now_us, bool stays);
  // Keeps this process's part in the shared turns up to date with the keys
  // it has waiting (joins, refreshes, leaves).
  void update_share(std::int64_t now_us);
  void forget_idle();

  const std::int64_t horizon_us_;
  mutable std::mutex mu_;
  Keys keys_;
  // The keys with a step queued, lowest pass first (ties: the key that
  // joined first; `order` is unique), and the keys whose first step waits
  // for its own limits, soonest first. B-trees of the keys' addresses,
  // ordered by what their state says: a key's pass, order and waking_at
  // change only while it is filed in neither (unplace, then place). About
  // nine bytes a key, where a node set of copies took a hundred.
  struct ByPass {
    bool operator()(const Entry* a, const Entry* b) const {
      return a->second.pass < b->second.pass ||
             (a->second.pass == b->second.pass && a->second.order < b->second.order);
    }
  };
  struct ByWake {
    bool operator()(const Entry* a, const Entry* b) const {
      return a->second.waking_at < b->second.waking_at ||
             (a->second.waking_at == b->second.waking_at && a->second.order < b->second.order);
    }
  };
  absl::btree_set<Entry*, ByPass> active_;
  absl::btree_set<Entry*, ByWake> waking_;
  std::uint64_t joined_ = 0;
  double pass_ = 0;  // of the latest grant
  std::size_t queued_ = 0;
  std::optional<std::int64_t> next_us_;
  // Spacing of recent grants (EWMA), for fallback().
  std::int64_t last_grant_us_ = 0;
  double spacing_us_ = 0;
  std::function<void()> notify_;
  Backlog backlog_;
  // Turns between processes: the weight of the keys active, in 1/kWeightScale.
  static constexpr double kWeightScale = 64;
  std::shared_ptr<limit::TurnShares> shares_;
  std::int64_t active_weight_ = 0;
  // This process takes part in the shared turns, with this weight, as
  // written at shared_us_.
  bool sharing_ = false;
  std::int64_t shared_weight_ = 0;
  std::int64_t shared_us_ = 0;
  std::int64_t alone_until_us_ = 0;  // no other process took part at the last look
};

}  // namespace ratchet::retry
