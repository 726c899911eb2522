// The accounts rows of the oscar benchmark: N jobs spread over A accounts,
// each calling one portal that limits every account (the `account` query
// parameter, `account_limit` a second) and itself as a whole (`limit` a
// second), in one header dialect. The engine declares both limits, the
// account's keyed by {{args.account}}, through the http_json plugin.
//
// Measured: makespan against the bound (N over the portal's rate, or one
// account's jobs over its rate when that is longer), 429s, the server's
// busiest second per account and in all, and the slowest account's finish
// against its bound (its jobs over the account rate, or the makespan bound
// when the portal's limit is the tighter: under a fair share every account
// finishes with the last). Each row runs on a server of its own.
//
// Thread-safety: one thread runs a row.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ratchet::bench {

struct AccountsSetup {
  int jobs = 1000;
  int accounts = 50;
  int workers = 16;
  std::int64_t account_rate = 4;   // per second, each account
  std::int64_t portal_rate = 100;  // per second, all accounts
  // How account jobs are spread: "even" (job i to account i mod A) or
  // "skewed" (one job in ten to account 0, the rest even).
  std::string spread = "even";
  std::chrono::seconds deadline{120};
  std::filesystem::path plugin_dir;
  std::filesystem::path work_dir;

  int account_of(int job) const;
  int jobs_of(int account) const;
  double bound_seconds() const;
  double account_bound_seconds(int account) const;
};

struct AccountsRow {
  std::string name;
  bool available = true;
  std::string note;
  int jobs_completed = 0;
  double makespan_s = 0;
  double bound_s = 0;
  std::int64_t requests = 0;
  std::int64_t throttled = 0;
  std::int64_t parks = 0;
  std::int64_t max_in_second = 0;          // the portal's busiest aligned second, all accounts
  std::int64_t max_account_in_second = 0;  // the busiest aligned second of any one account
  double slowest_over_bound = 0;           // max over accounts of finish / account bound
  std::string slowest_account;
  double slowest_finish_s = 0;
};

AccountsRow run_accounts(const AccountsSetup& setup);

void print_accounts(std::ostream& out, const AccountsSetup& setup, const std::vector<AccountsRow>& rows);
nlohmann::json accounts_json(const AccountsSetup& setup, const std::vector<AccountsRow>& rows);

}  // namespace ratchet::bench
