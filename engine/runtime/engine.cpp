// ratchet::Engine: the public API over the store, job types and scheduler.
#include <unistd.h>

#include <cctype>
#include <limits>
#include <random>

#include "common/secret_mask.hpp"
#include "runtime/args_check.hpp"
#include "runtime/clock_watch.hpp"
#include "runtime/engine_impl.hpp"

namespace ratchet {
namespace {

std::string default_worker_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%08x", rd());
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + suffix;
}

Status check_options(const EngineOptions& o) {
  auto bad = [](const std::string& m) { return fail(Error::invalid_argument("engine options: " + m)); };
  if (o.workers < 1) return bad("workers must be at least 1");
  if (o.lease <= Duration::zero()) return bad("lease must be positive");
  if (o.heartbeat <= Duration::zero() || o.heartbeat >= o.lease) {
    return bad(
        "heartbeat must be positive and shorter than the lease, so leases are renewed before they expire");
  }
  if (o.poll_interval <= Duration::zero()) return bad("poll_interval must be positive");
  if (o.report_interval <= Duration::zero()) return bad("report_interval must be positive");
  if (o.max_lease_expiries < 1) return bad("max_lease_expiries must be at least 1");
  if (o.database.empty()) return bad("database path is empty");
  return {};
}

config::JobTypeSpec spec_from(std::string name, const JobTypeOptions& o) {
  config::JobTypeSpec s;
  s.name = std::move(name);
  s.attempts = o.attempts;
  s.backoff.kind = config::Backoff::kExponential;
  s.backoff.initial = std::chrono::duration_cast<std::chrono::microseconds>(o.backoff.initial);
  s.backoff.max = std::chrono::duration_cast<std::chrono::microseconds>(o.backoff.max);
  s.backoff.multiplier = o.backoff.multiplier;
  s.backoff.jitter = o.backoff.jitter ? config::Jitter::kFull : config::Jitter::kNone;
  s.queue = o.queue;
  s.priority = o.priority;
  if (o.timeout) s.timeout = std::chrono::duration_cast<std::chrono::microseconds>(*o.timeout);
  for (const auto& a : o.args) s.args.push_back({a.name, static_cast<config::ArgType>(a.type), a.required});
  s.redact = o.redact;
  return s;
}

Status check_spec(const config::JobTypeSpec& s) {
  if (s.name.empty()) return fail(Error::invalid_argument("a job type needs a name"));
  if (s.attempts < 1) {
    return fail(Error::invalid_argument("job type \"" + s.name + "\": attempts must be at least 1"));
  }
  if (s.queue.empty()) return fail(Error::invalid_argument("job type \"" + s.name + "\": queue is empty"));
  return {};
}

// Every process on this machine sharing the database reads one timeline:
// the base the database holds for this boot (ratchet/clock.hpp).
Status anchor_clock(store::Store& store, const Clock& clock) {
  const auto* system = dynamic_cast<const SystemClock*>(&clock);
  if (system == nullptr) return {};
  const std::string boot = SystemClock::boot_id();
  if (boot.empty()) return {};
  const std::int64_t wall =
      std::chrono::duration_cast<std::chrono::nanoseconds>(SystemClock::wall_base()).count();
  auto stored = store.read([&](store::JobStore& s) { return s.stored_clock_base(boot); });
  if (!stored) return fail(stored.error());
  std::int64_t base = 0;
  if (*stored) {
    base = **stored;
  } else {
    auto made = store.write([&](store::JobStore& s) { return s.machine_clock_base(boot, wall); });
    if (!made) return fail(made.error());
    base = *made;
  }
  system->anchor(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(base)));
  runtime::ClockWatch{}.check(*system);
  return {};
}

}  // namespace

void Engine::Impl::wake() {
  std::lock_guard lock(scheduler_mu);
  if (scheduler) scheduler->wake();
}

void Engine::Impl::job_done() {
  {
    std::lock_guard lock(done_mu);
    ++done_count;
  }
  done_cv.notify_all();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { stop(); }

Result<std::unique_ptr<Engine>> Engine::open(EngineOptions options) {
  return runtime::open_engine(std::move(options));
}

const std::string& Engine::worker_id() const { return impl_->options.worker_id; }

std::string Engine::database() const { return impl_->store->location(); }

std::optional<Error> Engine::write_failure() const {
  return impl_->store->write_failure(3, std::chrono::seconds(5));
}

Status Engine::define(std::string type, JobHandler handler, JobTypeOptions options) {
  if (!handler) return fail(Error::invalid_argument("job type \"" + type + "\": the handler is empty"));
  auto spec = spec_from(std::move(type), options);
  if (auto st = check_spec(spec); !st) return st;
  impl_->types.define(
      std::make_shared<runtime::JobType>(runtime::JobType{std::move(spec), std::move(handler)}));
  impl_->wake();
  return {};
}

Result<std::vector<JobId>> Engine::enqueue_many(std::string_view type,
                                                const std::vector<nlohmann::json>& args,
                                                EnqueueOptions options) {
  auto t = impl_->types.find(std::string(type));
  if (!t) {
    std::string known;
    for (const auto& n : impl_->types.names()) known += (known.empty() ? "" : ", ") + n;
    return fail(Error::not_found("unknown job type \"" + std::string(type) +
                                 "\" (defined: " + (known.empty() ? "none" : known) + ")"));
  }
  const config::JobTypeSpec& spec = t->spec;
  int max_attempts = options.max_attempts.value_or(spec.attempts);
  if (max_attempts < 1) {
    return fail(Error::invalid_argument("job type \"" + spec.name + "\": max_attempts must be at least 1"));
  }
  TimePoint now = impl_->clock->now();
  if (options.delay && (*options.delay < Duration::zero() || *options.delay > kMaxScheduleSpan)) {
    return fail(Error::invalid_argument("job type \"" + spec.name +
                                        "\": the delay must be from 0 to 100 years (36500d)"));
  }
  if (options.run_at &&
      (options.run_at->time_since_epoch() < Duration::zero() || *options.run_at - now > kMaxScheduleSpan)) {
    return fail(Error::invalid_argument(
        "job type \"" + spec.name + "\": the run time must be after 1970 and at most 100 years from now"));
  }
  TimePoint run_at = options.run_at.value_or(now + options.delay.value_or(Duration::zero()));
  std::vector<store::NewJob> jobs;
  jobs.reserve(args.size());
  for (const auto& a : args) {
    if (auto st = runtime::check_args(spec.name, spec.args, a); !st) return fail(st.error());
    store::NewJob j;
    j.type = spec.name;
    j.queue = options.queue.empty() ? spec.queue : options.queue;
    try {
      j.args_json = a.dump();
    } catch (const nlohmann::json::exception& e) {
      return fail(Error::invalid_argument("job type \"" + spec.name +
                                          "\": arguments are not valid JSON text (" + e.what() + ")"));
    }
    // check_args_bounds counts strings unescaped; the text stored is what the
    // bound is on (a control character takes six bytes there).
    if (j.args_json.size() > runtime::kMaxArgsBytes) {
      return fail(Error::invalid_argument("job type \"" + spec.name + "\": arguments are " +
                                          std::to_string(j.args_json.size()) +
                                          " bytes as JSON, over the limit of 1 MiB; pass a reference such as "
                                          "an id or a URL instead"));
    }
    j.priority = options.priority.value_or(spec.priority);
    j.run_at = store::to_micros(run_at);
    j.max_attempts = max_attempts;
    j.unique_key = options.unique_key;
    jobs.push_back(std::move(j));
  }
  store::Micros now_us = store::to_micros(now);
  auto ids = impl_->store->write([&](store::JobStore& s) {
    std::vector<JobId> out;
    out.reserve(jobs.size());
    for (const auto& j : jobs) out.push_back(s.insert(j, now_us).id);
    return out;
  });
  if (!ids) return fail(ids.error().with_context("enqueueing a " + spec.name + " job"));
  if (run_at <= now) impl_->wake();
  return ids;
}

Result<JobId> Engine::enqueue(std::string_view type, nlohmann::json args, EnqueueOptions options) {
  // Moved, not copied: a braced list copies, and copying JSON recurses, so
  // arguments nested deeper than the stack allows would crash before
  // check_args (which walks them without recursion) could refuse them.
  std::vector<nlohmann::json> one;
  one.push_back(std::move(args));
  auto ids = enqueue_many(type, one, std::move(options));
  if (!ids) return fail(ids.error());
  return ids->front();
}

Status Engine::start() {
  if (!impl_->start_refusal.empty()) return fail(Error::invalid_argument(impl_->start_refusal));
  std::lock_guard lock(impl_->scheduler_mu);
  if (impl_->scheduler) return {};
  runtime::SchedulerOptions so{impl_->options.workers, impl_->options.heartbeat, impl_->options.poll_interval,
                               impl_->options.queues, impl_->options.max_lease_expiries};
  if (impl_->options.record_crashes && !impl_->crashes) {
    if (const std::filesystem::path record = impl_->store->crash_record(); !record.empty()) {
      // The handler only appends to the file: its folder must be there.
      std::error_code ec;
      std::filesystem::create_directories(record.parent_path(), ec);
      impl_->crashes = store::CrashRecorder::open(record, impl_->options.worker_id);
    }
  }
  runtime::ExecutorEnv env;
  env.run = runtime::RunEnv{impl_->store.get(),
                            impl_->clock.get(),
                            impl_->options.worker_id,
                            impl_->options.lease,
                            impl_->options.park_threshold,
                            impl_->caller.get(),
                            impl_->crashes.get()};
  env.render = impl_->render;
  env.jitter = impl_->jitter.get();
  env.events = &impl_->events;
  Impl* impl = impl_.get();
  impl_->scheduler = std::make_unique<runtime::Scheduler>(std::move(so), std::move(env), impl_->types,
                                                          [impl] { impl->job_done(); });
  if (impl_->caller) {
    // Jobs parked for a permit are resumed as soon as one frees up, not at
    // their fallback time.
    impl_->caller->set_resume([impl](JobId id, int attempt, TimePoint at) {
      const TimePoint now = impl->clock->now();
      const TimePoint when = std::max(now, at);
      const store::Micros when_us = store::to_micros(when);
      impl->store->write_async(
          [id, attempt, when_us, now_us = store::to_micros(now)](store::JobStore& s) {
            // At that time exactly: sooner than it was parked for, or later
            // (a turn's slot after the soonest its step was parked for).
            if (!s.resume_parked(id, attempt, when_us))
              (void)s.extend_parked({{id, attempt}}, when_us, now_us);
          },
          [impl,
           later = when > now ? std::optional<TimePoint>(when) : std::nullopt](const std::optional<Error>&) {
            if (!later) {
              impl->wake();
              return;
            }
            std::lock_guard held(impl->scheduler_mu);
            if (impl->scheduler) impl->scheduler->wake_at(*later);
          });
    });
    impl_->caller->set_backlog(
        [backlog = impl_->scheduler->backlog()] { return backlog->load(std::memory_order_relaxed); });
    impl_->caller->set_extend([impl](std::vector<std::pair<JobId, int>> jobs, TimePoint until) {
      const store::Micros now = store::to_micros(impl->clock->now());
      const store::Micros to = store::to_micros(until);
      impl->store->write_async(
          [jobs = std::move(jobs), to, now](store::JobStore& s) { (void)s.extend_parked(jobs, to, now); },
          [](const std::optional<Error>&) {});
    });
  }
  impl_->scheduler->start();
  if (impl_->fill_report) {
    impl_->reports.start(impl_->fill_report, *impl_->store, *impl_->clock, impl_->options.worker_id,
                         impl_->options.report_interval);
  }
  return {};
}

void Engine::stop() {
  std::unique_ptr<runtime::Scheduler> s;
  {
    std::lock_guard lock(impl_->scheduler_mu);
    s = std::move(impl_->scheduler);
  }
  if (s) {
    s->stop(std::chrono::duration_cast<std::chrono::steady_clock::duration>(impl_->options.shutdown_grace));
    if (impl_->caller) {
      impl_->caller->set_resume({});
      impl_->caller->set_extend({});
      impl_->caller->set_backlog({});
    }
    impl_->reports.stop();
  }
}

Status Engine::drain(std::optional<std::chrono::steady_clock::duration> timeout) {
  auto deadline =
      timeout ? std::chrono::steady_clock::now() + *timeout : std::chrono::steady_clock::time_point::max();
  while (true) {
    std::uint64_t seen;
    {
      std::lock_guard lock(impl_->done_mu);
      seen = impl_->done_count;
    }
    auto pending = impl_->store->read(
        [&](store::JobStore& s) { return s.pending(impl_->types.names(), impl_->options.queues); });
    if (!pending) return fail(pending.error());
    if (*pending == 0) return {};
    std::unique_lock lock(impl_->done_mu);
    // Jobs of other processes finish without telling us: look again soon.
    auto until = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
    impl_->done_cv.wait_until(lock, until, [&] { return impl_->done_count != seen; });
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(Error::timeout("drain: jobs are still pending after the timeout"));
    }
  }
}

Result<JobRecord> Engine::get(JobId id) {
  auto r = impl_->store->read([&](store::JobStore& s) { return s.get(id); });
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found("no job with id " + std::to_string(id)));
  return std::move(**r);
}

namespace {

std::string ascii_lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

Result<std::vector<JobRecord>> Engine::list(const JobFilter& filter) {
  auto page = impl_->store->read([&](store::JobStore& s) { return s.list(filter); });
  if (!page || filter.text.empty()) return page;
  // The store matches the text in the arguments as stored; a job matches
  // here only on what is shown of it, so a value listed in `redact` cannot
  // be found (a search for "dave@" found the job whose email was redacted,
  // and spelled the value out a letter at a time). Pages are read on until
  // the limit is filled.
  const std::string wanted = ascii_lower(filter.text);
  std::vector<JobRecord> out;
  JobFilter next = filter;
  while (true) {
    for (auto& job : *page) {
      JobRecord shown = redacted(job);
      if (ascii_lower(shown.args.dump()).find(wanted) == std::string::npos &&
          ascii_lower(shown.last_error).find(wanted) == std::string::npos) {
        continue;
      }
      out.push_back(std::move(job));
      if (static_cast<int>(out.size()) == filter.limit) return out;
    }
    if (static_cast<int>(page->size()) < next.limit || page->empty()) return out;
    if (next.newest_first) {
      next.before_id = page->back().id;
    } else {
      next.after_id = page->back().id;
    }
    page = impl_->store->read([&](store::JobStore& s) { return s.list(next); });
    if (!page) return page;
  }
}

Result<std::vector<std::pair<JobState, std::int64_t>>> Engine::counts() {
  return impl_->store->read([](store::JobStore& s) { return s.counts(); });
}

TimePoint Engine::now() const { return impl_->clock->now(); }

Result<std::vector<EngineReport>> Engine::reports(Duration within) {
  const store::Micros since = store::to_micros(impl_->clock->now() - within);
  auto stored = impl_->store->read([since](store::JobStore& s) { return s.reports(since); });
  if (!stored) return fail(stored.error());
  std::vector<EngineReport> out;
  for (const auto& r : *stored) {
    if (auto report = runtime::report_from_json(r.worker, store::from_micros(r.updated), r.report)) {
      out.push_back(std::move(*report));
    }
  }
  return out;
}

std::map<std::string, std::string> Engine::step_calls(std::string_view type) const {
  std::map<std::string, std::string> out;
  auto t = impl_->types.find(std::string(type));
  if (!t) return out;
  for (const auto& step : t->spec.steps) out.emplace(step.name, step.plugin + "." + step.operation);
  return out;
}

JobRecord Engine::redacted(JobRecord job) const {
  auto type = impl_->types.find(job.type);
  if (!type || !job.args.is_object()) return job;
  std::vector<std::string> values;
  for (const auto& name : type->spec.redact) {
    if (auto it = job.args.find(name); it != job.args.end()) {
      values.push_back(it->is_string() ? it->get<std::string>() : it->dump());
      *it = "[redacted]";
    }
  }
  // A value is also hidden where a server or a plugin echoed it, in any form
  // a secret is found in: a URL's path in an error ("HTTP 404 from
  // .../users/dave%40example.com"), a step's output.
  const common::SecretMask mask(values);
  if (mask.empty()) return job;
  job.last_error = mask.mask(job.last_error);
  job.result = mask.mask_json(job.result);
  for (auto& step : job.steps) {
    step.output = mask.mask_json(step.output);
    step.last_error = mask.mask(step.last_error);
  }
  for (auto& error : job.errors) error.error = mask.mask(error.error);
  for (auto& entry : job.timeline) entry.detail = mask.mask(entry.detail);
  return job;
}

Result<std::vector<MinuteActivity>> Engine::activity(TimePoint since) {
  const store::Micros from = store::to_micros(since);
  return impl_->store->read([from](store::JobStore& s) { return s.activity(from); });
}

Status Engine::cancel(JobId id) {
  store::Micros now = store::to_micros(impl_->clock->now());
  auto r = impl_->store->write([&](store::JobStore& s) { return s.cancel(id, now); });
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found("no job with id " + std::to_string(id)));
  if (**r == JobState::kCompleted || **r == JobState::kDead || **r == JobState::kCancelled) {
    if (**r != JobState::kCancelled) {
      return fail(Error::invalid_argument("job " + std::to_string(id) + " already ended (" +
                                          std::string(to_string(**r)) + "); nothing to cancel"));
    }
    // A job cancelled while it was parked never comes back for what the
    // caller kept for its steps; a running one is cancelled at its next step
    // boundary, and the end of its run tells the caller then.
    if (impl_->caller) impl_->caller->forget(id, std::numeric_limits<int>::max());
  }
  return {};
}

Status Engine::retry(JobId id) {
  store::Micros now = store::to_micros(impl_->clock->now());
  auto r = impl_->store->write([&](store::JobStore& s) { return s.retry(id, now, 1); });
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found("no job with id " + std::to_string(id)));
  if (**r != JobState::kDead && **r != JobState::kCancelled) {
    return fail(Error::invalid_argument("job " + std::to_string(id) + " is " + std::string(to_string(**r)) +
                                        "; only dead or cancelled jobs can be retried"));
  }
  impl_->wake();
  return {};
}

Result<std::int64_t> Engine::purge(Duration older_than) {
  // In chunks, one transaction each: the write lock is never held for long,
  // so the workers' checkpoints (and other processes) get their turns.
  constexpr int kChunk = 500;
  if (older_than < Duration::zero() || older_than > kMaxScheduleSpan) {
    return fail(Error::invalid_argument("purge: the age must be from 0 to 100 years (36500d)"));
  }
  store::Micros before = store::to_micros(impl_->clock->now() - older_than);
  std::int64_t total = 0;
  while (true) {
    auto n = impl_->store->write([&](store::JobStore& s) { return s.purge(before, kChunk); });
    if (!n)
      return total == 0 ? fail(n.error())
                        : fail(n.error().with_context(std::to_string(total) + " jobs purged before"));
    total += *n;
    if (*n < kChunk) return total;
  }
}

Engine::Subscription Engine::subscribe(std::function<void(const JobEvent&)> callback) {
  return impl_->events.subscribe(std::move(callback));
}

void Engine::unsubscribe(Subscription id) { impl_->events.unsubscribe(id); }

namespace runtime {

store::StoreOptions store_options(const EngineOptions& options) {
  store::StoreOptions s;
  s.database = options.database.string();
  s.sqlite_synchronous_full = options.sqlite.synchronous_full;
  s.postgres_connect_timeout = std::chrono::ceil<std::chrono::seconds>(options.postgres.connect_timeout);
  s.busy_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.busy_timeout);
  s.clock = options.clock;
  return s;
}

Result<std::unique_ptr<Engine>> open_engine(EngineOptions options, EngineWiring wiring) {
  if (auto st = check_options(options); !st) return fail(st.error());
  auto impl = std::make_unique<EngineAccess::Impl>();
  // An engine's own clock, since anchoring it to the database steps it.
  if (!options.clock) options.clock = std::make_shared<const SystemClock>();
  if (options.worker_id.empty()) options.worker_id = default_worker_id();
  std::uint64_t seed =
      options.seed != 0 ? options.seed : (std::uint64_t{std::random_device{}()} << 32) ^ ::getpid();
  auto store = store::open_store(store_options(options));
  if (!store) return fail(store.error());
  if (auto st = anchor_clock(**store, *options.clock); !st) return fail(st.error());
  impl->clock = options.clock;
  impl->options = std::move(options);
  impl->store = std::move(*store);
  impl->jitter = std::make_unique<Jitter>(seed);
  impl->caller = std::move(wiring.caller);
  if (wiring.render) impl->render = std::move(wiring.render);
  return EngineAccess::make(std::move(impl));
}

EngineOptions engine_options(const config::Config& config) {
  const config::EngineSpec& e = config.engine;
  EngineOptions o;
  o.database = e.database;
  if (!store::is_server_url(o.database.string()) && o.database.is_relative() && !config.file.empty())
    o.database = config.file.parent_path() / o.database;
  o.workers = e.workers;
  o.sqlite.synchronous_full = e.sqlite_synchronous_full;
  o.postgres.connect_timeout = e.postgres_connect_timeout;
  o.busy_timeout = e.busy_timeout;
  o.lease = e.lease;
  o.heartbeat = e.heartbeat;
  o.park_threshold = e.park_threshold;
  o.poll_interval = e.poll_interval;
  o.shutdown_grace = e.shutdown_grace;
  o.max_lease_expiries = e.max_lease_expiries;
  return o;
}

Status define_declarative(Engine& engine, config::JobTypeSpec spec) {
  if (auto st = check_spec(spec); !st) return st;
  if (spec.steps.empty()) {
    return fail(Error::invalid_argument("job type \"" + spec.name + "\" declares no steps"));
  }
  EngineAccess::impl(engine).types.define(std::make_shared<JobType>(JobType{std::move(spec), {}}));
  EngineAccess::impl(engine).wake();
  return {};
}

}  // namespace runtime
}  // namespace ratchet
