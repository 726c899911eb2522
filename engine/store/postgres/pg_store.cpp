#include "store/postgres/pg_store.hpp"

#include <algorithm>
#include <thread>

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

}  // namespace

PgStore::Failure PgStore::failure_of(const PgError& e) {
  Failure f{e.error()};
  f.transient = e.needs_reconnect() || e.transaction_retryable();
  f.transaction_lost = e.needs_reconnect();
  // A full disk on the server is 53100 (disk_full), 53xxx insufficient resources.
  f.disk = e.sqlstate().starts_with("53");
  return f;
}

Result<std::unique_ptr<PgStore>> PgStore::open(const PgStoreOptions& options) {
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
  auto r = connect(options.connect);
  if (!r) return fail(r.error().error());
  auto reader = std::make_unique<Side>(std::move(*r));
  return std::unique_ptr<PgStore>(new PgStore(options, std::move(writer), std::move(reader)));
}

PgStore::PgStore(PgStoreOptions options, std::unique_ptr<Side> writer, std::unique_ptr<Side> reader)
    : GroupCommitStore(options.clock, options.busy_timeout),
      options_(std::move(options)),
      writer_(std::move(writer)),
      reader_(std::move(reader)) {
  start_writer();
}

PgStore::~PgStore() { stop_writer(); }

std::string PgStore::location() const { return mask_url(options_.connect.url); }

LimiterTablesFactory PgStore::limiter_tables() const { return pg_limiter_tables(options_.connect); }

std::optional<PgStore::Failure> PgStore::begin_transaction() {
  if (auto e = ensure_connected(writer_->connection)) return failure_of(*e);
  try {
    writer_->session.simple("BEGIN");
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

std::optional<PgStore::Failure> PgStore::commit_transaction() {
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
