#include "store/postgres/pg_store.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "store/postgres/listener.hpp"
#include "store/postgres/pg_limiter_tables.hpp"
#include "store/postgres/pg_schema.hpp"
#include "store/postgres/url.hpp"

namespace ratchet::store::pg {
namespace {

// A failure that is not the server's (a bug, a malformed value).
Error internal_error(const std::exception& e) {
  return Error::internal(std::string("a database write failed: ") + e.what());
}

// Makes the connection usable: reconnects one that was lost.
std::optional<PgError> ensure_connected(Connection& c) {
  if (!c.is_broken()) return std::nullopt;
  if (auto st = c.reset(); !st) return st.error();
  return std::nullopt;
}

// This host's crash record for one database and schema: engines on other
// hosts never see it, so a crash is pinned on its job when the process that
// judges the expired leases runs on the crashed one's host (its restart, or
// another worker there); elsewhere it is judged as an outside kill.
std::filesystem::path crash_record_for(const std::string& masked_url, const std::string& schema) {
  std::filesystem::path base;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state == '/') {
    base = state;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    base = std::filesystem::path(home) / ".local" / "state";
  } else {
    return {};
  }
  // FNV-1a: a stable name, and no password in it (the URL is masked).
  std::uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : masked_url + '\n' + schema) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  char name[40];
  std::snprintf(name, sizeof name, "pg-%016llx.crashes", static_cast<unsigned long long>(hash));
  return base / "ratchet" / name;
}

}  // namespace

PgStore::Failure PgStore::failure_of(const PgError& e) {
  Failure f{e.error()};
  f.transient = e.needs_reconnect() || e.transaction_retryable();
  f.transaction_lost = e.needs_reconnect();
  // A full disk on the server is 53100 (disk_full), 53xxx insufficient
  // resources. A table or column gone, or a privilege revoked, refuses every
  // write as surely, and waiting cures it no more: the run stops saying so
  // (Engine::write_failure) instead of logging five errors a second for ever.
  static constexpr std::string_view kSchemaRefuses[] = {"42P01", "42703", "42501", "42883", "3F000"};
  f.disk = e.sqlstate().starts_with("53") ||
           std::ranges::find(kSchemaRefuses, std::string_view(e.sqlstate())) != std::end(kSchemaRefuses);
  return f;
}

Result<std::unique_ptr<PgStore>> PgStore::open(const PgStoreOptions& given) {
  PgStoreOptions options = given;
  // A statement waits for a lock no longer than a write waits in all: a
  // table another session held locked hung every claim and checkpoint, and
  // SIGTERM with them, until it let go.
  if (options.connect.lock_timeout.count() <= 0) options.connect.lock_timeout = options.busy_timeout;
  auto w = connect(options.connect);
  if (!w) return fail(w.error().error());
  auto writer = std::make_unique<Side>(std::move(*w));
  try {
    writer->session.simple("BEGIN");
    if (auto st = migrate_schema(writer->session, true); !st) {
      (void)writer->connection.exec("ROLLBACK");
      return fail(st.error());
    }
    writer->session.simple("COMMIT");
  } catch (const PgFailure& e) {
    (void)writer->connection.exec("ROLLBACK");
    return fail(e.error().error().with_context("opening the job store"));
  }
  // One channel per schema: deployments sharing a database in separate
  // schemas never wake each other.
  auto schema = writer->connection.exec("SELECT current_schema()");
  if (!schema) return fail(schema.error().error().with_context("opening the job store"));
  const std::string channel = "ratchet_jobs:" + std::string(schema->get_text(0, 0));
  std::filesystem::path record =
      crash_record_for(mask_url(options.connect.url), std::string(schema->get_text(0, 0)));
  writer->jobs.set_crash_record(record);
  auto r = connect(options.connect);
  if (!r) return fail(r.error().error());
  auto reader = std::make_unique<Side>(std::move(*r));
  auto store = std::unique_ptr<PgStore>(new PgStore(options, std::move(writer), std::move(reader), channel));
  store->crash_record_ = std::move(record);
  return store;
}

PgStore::PgStore(PgStoreOptions options, std::unique_ptr<Side> writer, std::unique_ptr<Side> reader,
                 std::string channel)
    : GroupCommitStore(options.clock, options.busy_timeout),
      options_(std::move(options)),
      writer_(std::move(writer)),
      reader_(std::move(reader)),
      channel_(std::move(channel)) {
  start_writer();
}

PgStore::~PgStore() {
  if (listener_.joinable()) {
    listener_.request_stop();
    listener_.join();
  }
  stop_writer();
}

void PgStore::on_new_work(std::function<void()> wake) {
  std::lock_guard lock(wake_mu_);
  wake_ = std::move(wake);
  if (wake_ && !listener_.joinable()) {
    listener_ = std::jthread([this](std::stop_token stop) { listen_loop(std::move(stop)); });
  }
}

void PgStore::announce_new_work() {
  std::lock_guard lock(wake_mu_);
  if (wake_) wake_();
}

void PgStore::listen_loop(std::stop_token stop) {
  // Short waits, so that stopping never takes long; a lost connection is
  // opened again with backoff.
  constexpr auto kWait = std::chrono::milliseconds(100);
  auto pause = std::chrono::milliseconds(50);
  std::optional<Connection> conn;
  while (!stop.stop_requested()) {
    if (!conn) {
      auto c = connect(options_.connect);
      if (c && listen(*c, channel_)) {
        conn.emplace(std::move(*c));
        pause = std::chrono::milliseconds(50);
        announce_new_work();  // what was announced while no one listened
      } else {
        const auto until = std::chrono::steady_clock::now() + pause;
        while (!stop.stop_requested() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(kWait / 4);
        pause = std::min(pause * 2, std::chrono::milliseconds(2000));
        continue;
      }
    }
    auto n = wait_for_notification(*conn, kWait);
    if (!n) {
      conn.reset();
      continue;
    }
    if (*n) {
      // One wake for every notification waiting now: the scheduler claims
      // all it can in one go.
      while (true) {
        auto more = wait_for_notification(*conn, std::chrono::milliseconds(0));
        if (!more || !*more) break;
      }
      announce_new_work();
    }
  }
}

std::string PgStore::location() const { return mask_url(options_.connect.url); }

LimiterTablesFactory PgStore::limiter_tables() const {
  return pg_limiter_tables(options_.connect, options_.busy_timeout);
}

std::optional<PgStore::Failure> PgStore::begin_transaction() {
  (void)writer_->jobs.take_new_work();  // a batch begun again announces anew
  if (auto e = ensure_connected(writer_->connection)) return failure_of(*e);
  try {
    // A claim must walk ratchet_jobs_due in claim order and stop after a
    // few rows. Without statistics (a table loaded faster than autovacuum
    // analyzes it, or one analyzed while nearly every job was finished) the
    // planner guesses a handful of due rows and picks a bitmap scan of all
    // of them plus a sort: a second per claim with a million queued. The
    // writer runs only claims and keyed writes, so its transactions plan
    // without those two, in the same round trip as BEGIN.
    writer_->session.simple("BEGIN; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off");
    return std::nullopt;
  } catch (const PgFailure& e) {
    return failure_of(e.error());
  }
}

std::optional<PgStore::Failure> PgStore::run_in_savepoint(const std::function<void(JobStore&)>& body) {
  try {
    writer_->session.simple("SAVEPOINT op");
  } catch (const PgFailure& e) {
    return failure_of(e.error());
  }
  std::optional<Failure> failed;
  try {
    body(writer_->jobs);
    writer_->session.simple("RELEASE SAVEPOINT op");
    return std::nullopt;
  } catch (const PgFailure& e) {
    failed = failure_of(e.error());
  } catch (const std::exception& e) {
    failed = Failure{internal_error(e)};
  }
  try {
    writer_->session.simple("ROLLBACK TO SAVEPOINT op");
    writer_->session.simple("RELEASE SAVEPOINT op");
  } catch (const PgFailure&) {
    // The transaction itself is gone; the commit reports it.
  }
  return failed;
}

std::optional<PgStore::Failure> PgStore::run_unguarded(const std::function<void(JobStore&)>& body) {
  // Two round trips fewer per write than a savepoint; a failure is rare and
  // costs the batch one more run (group_commit.hpp).
  std::optional<Failure> failed;
  try {
    body(writer_->jobs);
    return std::nullopt;
  } catch (const PgFailure& e) {
    failed = failure_of(e.error());
  } catch (const std::exception& e) {
    failed = Failure{internal_error(e)};
  }
  failed->spoiled = true;
  return failed;
}

void PgStore::rollback_transaction() { (void)writer_->connection.exec("ROLLBACK"); }

std::optional<PgStore::Failure> PgStore::commit_transaction() {
  if (writer_->jobs.take_new_work()) {
    // Delivered by the server when the transaction commits, never before.
    if (auto sent = notify(writer_->connection, channel_, ""); !sent) {
      Failure f = failure_of(sent.error());
      (void)writer_->connection.exec("ROLLBACK");
      return f;
    }
  }
  auto done = writer_->connection.exec("COMMIT");
  if (done) return std::nullopt;
  Failure f = failure_of(done.error());
  (void)writer_->connection.exec("ROLLBACK");
  return f;
}

Status PgStore::run_read(const std::function<void(JobStore&)>& body) {
  std::lock_guard lock(read_mu_);
  // A read has no effect to repeat: while the server is unreachable it is
  // tried again, with backoff, for up to the busy timeout.
  const auto give_up = std::chrono::steady_clock::now() + options_.busy_timeout;
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    std::optional<PgError> failed = ensure_connected(reader_->connection);
    if (!failed) {
      try {
        reader_->session.simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        body(reader_->jobs);
        reader_->session.simple("COMMIT");
        return {};
      } catch (const PgFailure& e) {
        (void)reader_->connection.exec("ROLLBACK");
        failed = e.error();
      } catch (const std::exception& e) {
        (void)reader_->connection.exec("ROLLBACK");
        return fail(Error::internal(std::string("a database read failed: ") + e.what()));
      }
    }
    if (!failed->needs_reconnect() || std::chrono::steady_clock::now() + pause > give_up)
      return fail(failed->error());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
}

}  // namespace ratchet::store::pg
