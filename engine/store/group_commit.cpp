#include "store/group_commit.hpp"

#include <algorithm>
#include <unordered_set>

namespace ratchet::store {
namespace {

// Enough to amortise a commit over every worker, small enough that one
// transaction never holds the write lock for long.
constexpr std::size_t kMaxBatch = 512;

// Pauses between attempts to begin a transaction that the database refused
// for now (each attempt itself may wait up to the busy timeout).
constexpr std::chrono::milliseconds kFirstRetry{10};
constexpr std::chrono::milliseconds kMaxRetry{250};

}  // namespace

GroupCommitStore::GroupCommitStore(std::shared_ptr<const Clock> clock,
                                   std::chrono::steady_clock::duration busy_timeout)
    : clock_(clock ? std::move(clock) : SystemClock::instance()), busy_timeout_(busy_timeout) {}

GroupCommitStore::~GroupCommitStore() { stop_writer(); }

void GroupCommitStore::start_writer() {
  thread_ = std::jthread([this](std::stop_token stop) { run_writer(stop); });
}

void GroupCommitStore::stop_writer() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

std::optional<Error> GroupCommitStore::run_write(std::function<void(JobStore&)> body,
                                                 std::optional<TimePoint> lease_until) {
  Op op;
  op.body = std::move(body);
  op.lease_until = lease_until;
  submit(op);
  return std::move(op.error);
}

std::uint64_t GroupCommitStore::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

bool GroupCommitStore::stalled() const {
  std::lock_guard lock(mu_);
  return stalled_;
}

void GroupCommitStore::wait_while_stalled(std::stop_token stop,
                                          std::chrono::steady_clock::duration at_most) const {
  std::unique_lock lock(mu_);
  stall_cv_.wait_for(lock, stop, at_most, [&] { return !stalled_; });
}

void GroupCommitStore::set_stalled(bool stalled) {
  {
    std::lock_guard lock(mu_);
    if (stalled_ == stalled) return;
    stalled_ = stalled;
  }
  stall_cv_.notify_all();
}

void GroupCommitStore::finish_op(Op* op) {
  if (op->on_run_done) {
    std::unique_ptr<Op> owned(op);
    if (owned->error) {
      owned->on_run_done(fail(std::move(*owned->error)));
    } else {
      owned->on_run_done(owned->run_written);
    }
    return;
  }
  if (op->on_done) {
    std::unique_ptr<Op> owned(op);
    owned->on_done(std::move(owned->error));
    return;
  }
  std::lock_guard lock(op->mu);
  op->done = true;
  // Notified under the lock: the waiter may destroy op as soon as it sees done.
  op->cv.notify_one();
}

void GroupCommitStore::submit(Op& op) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(&op);
  }
  cv_.notify_one();
  std::unique_lock lock(op.mu);
  op.cv.wait(lock, [&] { return op.done; });
}

void GroupCommitStore::enqueue(std::unique_ptr<Op> op) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(op.release());
  }
  cv_.notify_one();
}

void GroupCommitStore::write_async(std::function<void(JobStore&)> body,
                                   std::function<void(std::optional<Error>)> done,
                                   std::optional<TimePoint> lease_until) {
  auto op = std::make_unique<Op>();
  op->body = std::move(body);
  op->on_done = std::move(done);
  op->lease_until = lease_until;
  enqueue(std::move(op));
}

void GroupCommitStore::write_run_async(RunWrite run, std::function<void(Result<LeaseWrite>)> done,
                                       TimePoint lease_until) {
  auto op = std::make_unique<Op>();
  op->run = std::move(run);
  op->on_run_done = std::move(done);
  op->lease_until = lease_until;
  enqueue(std::move(op));
}

Result<LeaseWrite> GroupCommitStore::write_run_under_lease(TimePoint lease_until, RunWrite run) {
  Op op;
  op.run = std::move(run);
  op.lease_until = lease_until;
  submit(op);
  if (op.error) return fail(std::move(*op.error));
  return op.run_written;
}

std::size_t GroupCommitStore::group_end(const std::deque<Op*>& batch, std::size_t from, bool guarded) const {
  if (!batch[from]->run || guarded || !merges_runs()) return from + 1;
  // The run writes next to this one, each of a job not in the group yet
  // (write_runs takes distinct jobs).
  std::unordered_set<JobId> jobs;
  std::size_t to = from;
  while (to < batch.size() && batch[to]->run && jobs.insert(batch[to]->run->id).second) ++to;
  return to;
}

std::optional<GroupCommitStore::Failure> GroupCommitStore::run_ops(std::deque<Op*>& batch, std::size_t from,
                                                                   std::size_t to, bool guarded) {
  std::function<void(JobStore&)> runs;
  const std::function<void(JobStore&)>* body = &batch[from]->body;
  if (batch[from]->run) {
    runs = [&](JobStore& s) {
      std::vector<const RunWrite*> group;
      for (std::size_t i = from; i < to; ++i) group.push_back(&*batch[i]->run);
      // Read when the write runs: a write that waited for a lock is fenced
      // by the lease as it is then.
      const Micros now = to_micros(clock_->now());
      const std::vector<LeaseWrite> written = s.write_runs(group, now);
      for (std::size_t i = from; i < to; ++i) {
        LeaseWrite w = written.at(i - from);
        const RunWrite& run = *batch[i]->run;
        w.renewed_to = w.held && !run.result_json ? now + run.lease : 0;
        batch[i]->run_written = w;
      }
    };
    body = &runs;
  }
  return guarded ? run_in_savepoint(*body) : run_unguarded(*body);
}

void GroupCommitStore::run_writer(std::stop_token stop) {
  std::deque<Op*> batch;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return !queue_.empty(); });
      // Stop only once every queued write has run: callers are waiting.
      if (queue_.empty()) return;
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    commit_batch(batch, stop);
    {
      std::lock_guard lock(mu_);
      ++commits_;
    }
    for (Op* op : batch) finish_op(op);
    batch.clear();
  }
}

bool GroupCommitStore::begin_batch(std::deque<Op*>& batch, std::stop_token stop) {
  auto backoff = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kFirstRetry);
  while (true) {
    const TimePoint tried = clock_->now();
    std::optional<Failure> failure = begin_transaction();
    if (!failure) {
      set_stalled(false);
      return true;
    }
    const Error& error = failure->error;
    if (!failure->transient || stop.stop_requested()) {
      for (Op* op : batch) op->error = error;
      note_batch(false, failure->disk ? std::optional<Error>(error) : std::nullopt, tried);
      return false;
    }
    // The database is locked past the busy timeout, or unreachable for now.
    // A write without a lease has waited its timeout and fails; one under a
    // lease waits on while the lease lasts: it keeps committed work from
    // being done again.
    set_stalled(true);
    note_outage(tried);
    const TimePoint now = clock_->now();
    // (Half the timeout: a write that joined the batch during the stall
    // has waited at least one whole attempt, so at least that.)
    const auto waited_since = std::chrono::steady_clock::now() - busy_timeout_ / 2;
    std::erase_if(batch, [&](Op* op) {
      const bool give_up = op->lease_until ? *op->lease_until <= now : op->queued <= waited_since;
      if (!give_up) return false;
      op->error = op->lease_until
                      ? Error::database(error.message() +
                                        "; the lease this write was made under expired before the "
                                        "database took it, so it was given up")
                      : error;
      finish_op(op);
      return true;
    });
    std::unique_lock lock(mu_);
    // Writes queued meanwhile join the batch, so each caller waits for
    // one commit, not for its turn after this one.
    while (!queue_.empty() && batch.size() < kMaxBatch) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    if (batch.empty()) {
      // No lease write waits any more: not stalled, so the dispatcher's
      // next claim finds out whether the database is still refusing.
      stalled_ = false;
      lock.unlock();
      stall_cv_.notify_all();
      return false;
    }
    cv_.wait_for(lock, stop, backoff, [] { return false; });
    backoff =
        std::min(backoff * 2, std::chrono::duration_cast<std::chrono::steady_clock::duration>(kMaxRetry));
  }
}

void GroupCommitStore::commit_batch(std::deque<Op*>& batch, std::stop_token stop) {
  // Rounds of a batch whose connection was lost before COMMIT: a statement
  // that takes the server down every time must not loop for ever.
  constexpr int kMaxLostRounds = 8;
  std::optional<Error> disk_error;
  bool guarded = false;  // each write in a savepoint of its own, after one spoiled the batch
  TimePoint tried{};
  for (int round = 1;; ++round) {
    if (!begin_batch(batch, stop)) return;
    tried = clock_->now();
    disk_error.reset();
    std::optional<Error> lost;
    bool spoiled = false;
    for (std::size_t from = 0; from < batch.size();) {
      const std::size_t to = group_end(batch, from, guarded);
      for (std::size_t i = from; i < to; ++i) batch[i]->error.reset();
      auto failure = run_ops(batch, from, to, guarded);
      if (failure) {
        if (failure->transaction_lost && round < kMaxLostRounds) {
          lost = failure->error;
          break;
        }
        if (failure->spoiled && !guarded) {
          spoiled = true;
          break;
        }
        if (failure->disk) disk_error = failure->error;
        for (std::size_t i = from; i < to; ++i) batch[i]->error = failure->error;
      }
      from = to;
    }
    if (spoiled) {
      rollback_transaction();
      guarded = true;
      --round;  // not a lost connection: no round of those used up
      continue;
    }
    if (!lost) break;
    (void)commit_transaction();  // rolls back what is left of it
    set_stalled(true);
    note_outage(tried);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, stop, kFirstRetry * round, [] { return false; });
  }
  if (auto failure = commit_transaction()) {
    for (Op* op : batch) {
      if (!op->error) op->error = failure->error;
    }
    if (failure->disk) disk_error = failure->error;
    if (failure->transient) note_outage(tried);
    note_batch(false, disk_error, tried);
    return;
  }
  note_batch(!disk_error, disk_error, tried);
}

void GroupCommitStore::note_batch(bool committed, const std::optional<Error>& disk_error, TimePoint tried) {
  if (disk_error) note_outage(tried);
  std::lock_guard lock(mu_);
  if (disk_error) {
    if (disk_failures_++ == 0) disk_failing_since_ = std::chrono::steady_clock::now();
    disk_error_ = disk_error;
  } else if (committed) {
    disk_failures_ = 0;
    disk_error_.reset();
    outage_open_ = false;
  }
}

void GroupCommitStore::note_outage(TimePoint tried) {
  const TimePoint now = clock_->now();
  std::lock_guard lock(mu_);
  if (outage_open_) {
    Outage& last = outages_.back();
    last.from = std::min(last.from, tried);
    last.to = std::max(last.to, now);
    return;
  }
  outages_.push_back({tried, now});
  outage_open_ = true;
  if (outages_.size() > kOutagesKept) outages_.pop_front();
}

std::vector<Outage> GroupCommitStore::write_outages() const {
  std::lock_guard lock(mu_);
  return {outages_.begin(), outages_.end()};
}

std::optional<Error> GroupCommitStore::write_failure(int in_a_row,
                                                     std::chrono::steady_clock::duration for_at_least) const {
  std::lock_guard lock(mu_);
  if (!disk_error_ || disk_failures_ < in_a_row) return std::nullopt;
  if (std::chrono::steady_clock::now() - disk_failing_since_ < for_at_least) return std::nullopt;
  return disk_error_;
}

}  // namespace ratchet::store
