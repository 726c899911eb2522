#include "limit/turn_shares.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace ratchet::limit {
namespace {

// The row that holds the pass of the latest grant (no process is named "").
const std::string kLatest;

std::string random_owner() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = kHex[(v >> (4 * i)) & 0xF];
  return out;
}

}  // namespace

DatabaseTurnShares::DatabaseTurnShares(std::string name, std::string owner,
                                       std::shared_ptr<SharedLimiterTables> tables)
    : name_(std::move(name)), owner_(std::move(owner)), tables_(std::move(tables)) {}

Result<std::shared_ptr<DatabaseTurnShares>> DatabaseTurnShares::open(std::string name,
                                                                     const ConnectionFactory& connect,
                                                                     std::string owner) {
  auto tables = SharedLimiterTables::open(connect);
  if (!tables) return fail(tables.error().with_context("turns " + name));
  if (owner.empty()) owner = random_owner();
  return std::shared_ptr<DatabaseTurnShares>(
      new DatabaseTurnShares(std::move(name), std::move(owner), std::move(*tables)));
}

Result<TurnShares::Taken> DatabaseTurnShares::take(double weight, std::int64_t now_us, bool anyway,
                                                   bool stays) {
  return decide(weight, now_us, true, anyway, stays ? now_us + kLiveUs : now_us - 1);
}

Status DatabaseTurnShares::join(double weight, std::int64_t now_us) {
  auto joined = decide(weight, now_us, false, false, now_us + kLiveUs);
  if (!joined) return fail(joined.error());
  return {};
}

Result<TurnShares::Taken> DatabaseTurnShares::decide(double weight, std::int64_t now_us, bool grant,
                                                     bool anyway, std::int64_t until) {
  weight = std::max(weight, 1e-9);
  bool mine = false;
  bool alone = true;
  std::lock_guard lock(tables_->mu);
  store::LimiterTables& db = *tables_->db;
  auto st = db.transact(name_, (grant ? "take a turn on " : "join the turns on ") + name_, [&] {
    const std::vector<store::LimiterTables::TurnRow> rows = db.turn_rows(name_);
    double latest = 0;
    std::optional<store::LimiterTables::TurnRow> own;
    bool stale = false;
    for (const auto& r : rows) {
      if (r.owner == kLatest) latest = r.pass;
      if (r.owner == owner_) own = r;
      if (r.owner != kLatest && r.until < now_us - kForgetUs) stale = true;
    }
    // A process behind the latest grant (others took the slots it was slow
    // to take) keeps at most one turn of the lag, as if it had been granted
    // the latest slot's turn alongside: it does not then take a run of
    // slots to catch up.
    auto at_least = [latest](double pass, double w) { return std::max(pass, latest - 1.0 / w); };
    double pass = own ? at_least(own->pass, weight) : latest;
    // Joining (again): at the latest grant's pass at least.
    if (!own || own->weight <= 0 || own->until < now_us) pass = std::max(pass, latest);
    mine = true;
    for (const auto& r : rows) {
      if (r.owner == kLatest || r.owner == owner_ || r.until < now_us || r.weight <= 0) continue;
      alone = false;
      const double theirs = at_least(r.pass, r.weight);
      if (theirs < pass || (theirs == pass && r.owner < owner_)) mine = false;
    }
    if (grant && (mine || anyway)) {
      db.put_turn_row(name_, {kLatest, std::max(latest, pass), 0, std::numeric_limits<std::int64_t>::max()});
      pass += 1.0 / weight;
      mine = true;
    }
    db.put_turn_row(name_, {owner_, pass, weight, until});
    if (stale) db.prune_turn_rows(name_, now_us - kForgetUs);
  });
  if (!st) return fail(st.error());
  return Taken{mine, alone};
}

Status DatabaseTurnShares::leave(std::int64_t now_us) {
  std::lock_guard lock(tables_->mu);
  store::LimiterTables& db = *tables_->db;
  return db.transact(name_, "leave the turns on " + name_, [&] {
    for (const auto& r : db.turn_rows(name_)) {
      if (r.owner == owner_) db.put_turn_row(name_, {owner_, r.pass, 0, now_us - 1});
    }
  });
}

}  // namespace ratchet::limit
