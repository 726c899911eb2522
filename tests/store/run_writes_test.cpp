// Conformance cases for run writes (JobStore::write_runs, Store::write_run_async):
// many runs' steps and completions written together, each fenced by its own
// claim, each with its own outcome. A server backend writes them in one
// statement, so these cases also check that nothing of one run leaks into
// another's and that any text survives the trip.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "backends.hpp"
#include "store/job_store.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kSec = 1'000'000;
constexpr Micros kLease = 30 * kSec;

class RunWritesTest : public testing::StoreBackendTest {
 protected:
  void SetUp() override {
    database_ = GetParam().fresh_database(dir_);
    StoreOptions o;
    o.database = database_;
    o.clock = clock_;
    auto s = open_store(o);
    ASSERT_TRUE(s) << s.error().to_string();
    store_ = std::move(*s);
    t0_ = to_micros(clock_->now());
  }

  // Adds `n` jobs and claims them; their fences, in id order.
  std::vector<std::pair<JobId, Fence>> claimed(int n, const std::string& owner = "w") {
    auto ids = store_->write([&](JobStore& s) {
      std::vector<JobId> out;
      for (int i = 0; i < n; ++i) out.push_back(s.insert({"t", "default", "{}", 0, t0_, 3, ""}, t0_).id);
      return out;
    });
    EXPECT_TRUE(ids) << ids.error().to_string();
    ClaimRequest req{owner, t0_, t0_ + kLease, n, {"t"}, {}, 3};
    auto c = store_->write([&](JobStore& s) { return s.claim(req); });
    EXPECT_TRUE(c) << c.error().to_string();
    std::map<JobId, Fence> fences;
    for (const auto& j : c->jobs) fences[j.id] = Fence{owner, j.token};
    std::vector<std::pair<JobId, Fence>> out(fences.begin(), fences.end());
    EXPECT_EQ(out.size(), static_cast<std::size_t>(n));
    return out;
  }

  StepDone step(JobId id, const Fence& f, const std::string& name, const std::string& output) const {
    return {id, f, name, output, t0_, t0_ + 1};
  }

  JobRecord job(JobId id) {
    auto r = store_->read([&](JobStore& s) { return s.get(id); });
    EXPECT_TRUE(r && r->has_value()) << (r ? "no such job" : r.error().to_string());
    return r && *r ? **r : JobRecord{};
  }

  std::vector<LeaseWrite> write_runs(const std::vector<RunWrite>& runs, Micros now) {
    std::vector<const RunWrite*> ptrs;
    for (const auto& r : runs) ptrs.push_back(&r);
    auto w = store_->write([&](JobStore& s) { return s.write_runs(ptrs, now); });
    EXPECT_TRUE(w) << w.error().to_string();
    return w ? *w : std::vector<LeaseWrite>{};
  }

  // Queues `runs` with write_run_async while the writer is held busy, so
  // that they make one batch; each one's outcome, by index.
  std::vector<Result<LeaseWrite>> queued_together(std::vector<RunWrite> runs) {
    std::atomic<bool> hold = true;
    store_->write_async(
        [&](JobStore&) {
          while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        },
        [](std::optional<Error>) {});
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::size_t, Result<LeaseWrite>> got;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      store_->write_run_async(
          std::move(runs[i]),
          [&, i](Result<LeaseWrite> w) {
            std::lock_guard lock(mu);
            got.emplace(i, std::move(w));
            cv.notify_all();
          },
          from_micros(t0_ + kLease));
    }
    hold = false;
    // Every write reports back (a writer that hangs is the test's timeout);
    // the callbacks refer to this frame, so it waits for all of them.
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return got.size() == runs.size(); });
    std::vector<Result<LeaseWrite>> out;
    for (auto& [i, w] : got) out.push_back(std::move(w));
    return out;
  }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  Micros t0_ = 0;
};

TEST_P(RunWritesTest, ManyRunsInOneCall_EachWrittenOrRefusedByItsOwnClaim) {
  auto jobs = claimed(6);
  const auto& [a, fa] = jobs[0];  // completes with two steps
  const auto& [b, fb] = jobs[1];  // one step, goes on
  const auto& [c, fc] = jobs[2];  // a stale claim: refused
  const auto& [d, fd] = jobs[3];  // completes without steps
  const auto& [e, fe] = jobs[4];  // a step committed before, written again
  const auto& [g, fg] = jobs[5];  // renewal only
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.checkpoint(step(e, fe, "fetch", R"({"v":1})"), t0_ + kLease, t0_).held;
                  })
                  .value());
  ASSERT_EQ(store_->write([&](JobStore& s) { return s.cancel(b, t0_); }).value(), JobState::kRunning);
  ASSERT_EQ(store_->write([&](JobStore& s) { return s.cancel(d, t0_); }).value(), JobState::kRunning);

  const Micros now = t0_ + 5 * kSec;
  const std::vector<RunWrite> runs = {
      {a, fa, {step(a, fa, "one", "1"), step(a, fa, "two", R"({"x":[2]})")}, R"({"done":"a"})", kLease},
      {b, fb, {step(b, fb, "one", "\"b\"")}, std::nullopt, kLease},
      {c, Fence{fc.owner, fc.token + 1}, {step(c, fc, "one", "1")}, "\"c\"", kLease},
      {d, fd, {}, "42", kLease},
      {e, fe, {step(e, fe, "fetch", R"({"v":2})"), step(e, fe, "next", "3")}, "\"e\"", kLease},
      {g, fg, {}, std::nullopt, kLease},
  };
  const auto w = write_runs(runs, now);
  ASSERT_EQ(w.size(), runs.size());
  EXPECT_TRUE(w[0].held);
  EXPECT_TRUE(w[1].held);
  EXPECT_TRUE(w[1].cancel_requested) << "a run that goes on hears of its cancel request";
  EXPECT_FALSE(w[2].held) << "another claim's token";
  EXPECT_TRUE(w[3].held);
  EXPECT_FALSE(w[3].cancel_requested) << "a completed run reports no cancel request, as complete() does";
  EXPECT_TRUE(w[4].held);
  EXPECT_TRUE(w[5].held);

  auto ja = job(a);
  EXPECT_EQ(ja.state, JobState::kCompleted);
  EXPECT_EQ(ja.result["done"], "a");
  ASSERT_EQ(ja.steps.size(), 2u);
  EXPECT_FALSE(ja.lease_expires_at.has_value());
  EXPECT_EQ(to_micros(*ja.finished_at), now);

  auto jb = job(b);
  EXPECT_EQ(jb.state, JobState::kRunning);
  ASSERT_EQ(jb.steps.size(), 1u);
  EXPECT_EQ(jb.steps[0].output, "b");
  EXPECT_EQ(to_micros(*jb.lease_expires_at), now + kLease);

  auto jc = job(c);
  EXPECT_EQ(jc.state, JobState::kRunning);
  EXPECT_TRUE(jc.steps.empty()) << "nothing of a refused run is written";
  EXPECT_EQ(to_micros(*jc.lease_expires_at), t0_ + kLease);

  EXPECT_EQ(job(d).state, JobState::kCompleted);
  EXPECT_EQ(job(d).result, 42);

  auto je = job(e);
  EXPECT_EQ(je.state, JobState::kCompleted);
  std::map<std::string, nlohmann::json> outputs;
  for (const auto& s : je.steps) outputs[s.name] = s.output;
  EXPECT_EQ(outputs["fetch"]["v"], 1) << "a completed step keeps its first output";
  EXPECT_EQ(outputs["next"], 3);

  auto jg = job(g);
  EXPECT_EQ(jg.state, JobState::kRunning);
  EXPECT_TRUE(jg.steps.empty());
  EXPECT_EQ(to_micros(*jg.lease_expires_at), now + kLease);
}

TEST_P(RunWritesTest, AfterTheLeaseExpired_RefusedAndNothingWritten) {
  auto jobs = claimed(2);
  const Micros late = t0_ + kLease;  // the lease ends here
  const std::vector<RunWrite> runs = {
      {jobs[0].first, jobs[0].second, {step(jobs[0].first, jobs[0].second, "one", "1")}, "1", kLease},
      {jobs[1].first,
       jobs[1].second,
       {step(jobs[1].first, jobs[1].second, "one", "1")},
       std::nullopt,
       kLease},
  };
  const auto w = write_runs(runs, late);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_FALSE(w[0].held);
  EXPECT_FALSE(w[1].held);
  for (const auto& [id, fence] : jobs) {
    EXPECT_EQ(job(id).state, JobState::kRunning);
    EXPECT_TRUE(job(id).steps.empty());
  }
}

// Step names, outputs and results are the run's own text: quotes,
// backslashes, braces, commas, the word NULL and non-ASCII letters come back
// exactly as written.
TEST_P(RunWritesTest, AnyText_ComesBackExactly) {
  auto jobs = claimed(2);
  const std::vector<std::string> names = {"a,\"b\"\\{c} NULL", "NULL", "", " spaced ", "ünï{}"};
  std::vector<StepDone> steps;
  for (std::size_t i = 0; i < names.size(); ++i) {
    nlohmann::json out = {{"s", names[i] + "\\\"}{,"}, {"i", i}};
    steps.push_back(step(jobs[0].first, jobs[0].second, names[i], out.dump()));
  }
  const std::string result = nlohmann::json{{"r", "\\\"NULL\"{}"}}.dump();
  const std::vector<RunWrite> runs = {
      {jobs[0].first, jobs[0].second, steps, result, kLease},
      {jobs[1].first, jobs[1].second, {step(jobs[1].first, jobs[1].second, "NULL", "null")}, "null", kLease},
  };
  const auto w = write_runs(runs, t0_ + kSec);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].held && w[1].held);
  auto j = job(jobs[0].first);
  EXPECT_EQ(j.result.dump(), result);
  std::map<std::string, std::string> stored;
  for (const auto& s : j.steps) stored[s.name] = s.output.dump();
  ASSERT_EQ(stored.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(stored[names[i]], steps[i].output_json) << names[i];
  auto j1 = job(jobs[1].first);
  EXPECT_EQ(j1.state, JobState::kCompleted);
  EXPECT_TRUE(j1.result.is_null());
  ASSERT_EQ(j1.steps.size(), 1u);
  EXPECT_EQ(j1.steps[0].name, "NULL");
}

// Run writes queued while the writer is busy make one batch; each caller
// gets its own run's outcome, and a renewal says where it left the lease.
TEST_P(RunWritesTest, QueuedTogether_EachCallerGetsItsOwnOutcome) {
  constexpr int kRuns = 12;
  auto jobs = claimed(kRuns);
  clock_->advance(std::chrono::seconds(2));
  const Micros now = to_micros(clock_->now());
  std::vector<RunWrite> runs;
  for (int i = 0; i < kRuns; ++i) {
    const auto& [id, fence] = jobs[static_cast<std::size_t>(i)];
    // Every third one with a stale token; odd ones complete, even ones go on.
    const Fence f = i % 3 == 2 ? Fence{fence.owner, fence.token + 1} : fence;
    RunWrite run{id, f, {step(id, fence, "s" + std::to_string(i), std::to_string(i))}, std::nullopt, kLease};
    if (i % 2 == 1) run.result_json = std::to_string(100 + i);
    runs.push_back(std::move(run));
  }
  const auto got = queued_together(std::move(runs));
  for (int i = 0; i < kRuns; ++i) {
    const auto& w = got[static_cast<std::size_t>(i)];
    ASSERT_TRUE(w) << w.error().to_string();
    const auto& [id, fence] = jobs[static_cast<std::size_t>(i)];
    const bool stale = i % 3 == 2;
    const bool completes = i % 2 == 1;
    EXPECT_EQ(w->held, !stale) << "run " << i;
    EXPECT_EQ(w->renewed_to, !stale && !completes ? now + kLease : 0) << "run " << i;
    auto j = job(id);
    EXPECT_EQ(j.state, !stale && completes ? JobState::kCompleted : JobState::kRunning) << "run " << i;
    EXPECT_EQ(j.steps.size(), stale ? 0u : 1u) << "run " << i;
    if (!stale && completes) {
      EXPECT_EQ(j.result, 100 + i);
    }
  }
  // The same through the waiting call.
  auto more = claimed(1, "w2");
  auto w = store_->write_run_under_lease(from_micros(t0_ + kLease),
                                         RunWrite{more[0].first,
                                                  more[0].second,
                                                  {step(more[0].first, more[0].second, "x", "1")},
                                                  std::nullopt,
                                                  kLease});
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_TRUE(w->held);
  EXPECT_EQ(w->renewed_to, now + kLease);
}

// A run write the database refuses (PostgreSQL refuses text that is not
// UTF-8) among others of one batch fails alone: a backend that wrote the
// batch in one statement writes it again run by run, and every other run
// is committed with its own outcome.
TEST_P(RunWritesTest, OneTheDatabaseRefuses_FailsAloneTheOthersAreWritten) {
  constexpr int kRuns = 5;
  constexpr int kBad = 2;
  auto jobs = claimed(kRuns);
  std::vector<RunWrite> runs;
  for (int i = 0; i < kRuns; ++i) {
    const auto& [id, fence] = jobs[static_cast<std::size_t>(i)];
    const std::string name = i == kBad ? std::string("bad \xff\xfe name") : "s" + std::to_string(i);
    runs.push_back(RunWrite{id, fence, {step(id, fence, name, "1")}, "\"done\"", kLease});
  }
  const auto got = queued_together(std::move(runs));
  for (int i = 0; i < kRuns; ++i) {
    const auto& w = got[static_cast<std::size_t>(i)];
    const JobId id = jobs[static_cast<std::size_t>(i)].first;
    if (i == kBad) {
      if (backend().name == "postgres") {
        ASSERT_FALSE(w) << "PostgreSQL refuses a name that is not UTF-8";
        EXPECT_NE(w.error().message().find("UTF8"), std::string::npos) << w.error().to_string();
        EXPECT_EQ(job(id).state, JobState::kRunning) << "nothing of the refused run is written";
        EXPECT_TRUE(job(id).steps.empty());
      }
      continue;
    }
    ASSERT_TRUE(w) << "run " << i << ": " << w.error().to_string();
    EXPECT_TRUE(w->held) << "run " << i;
    EXPECT_EQ(job(id).state, JobState::kCompleted) << "run " << i;
    EXPECT_EQ(job(id).steps.size(), 1u) << "run " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RunWritesTest, ::testing::ValuesIn(testing::backends()),
                         testing::backend_name);

}  // namespace
}  // namespace ratchet::store
