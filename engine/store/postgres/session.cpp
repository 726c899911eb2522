#include "store/postgres/session.hpp"

namespace ratchet::store::pg {

Rows Session::run(const char* sql, const Params& params) {
  auto it = names_.find(sql);
  if (it == names_.end()) {
    std::string name = "ratchet_" + std::to_string(names_.size() + 1);
    if (auto st = c_.prepare(name, sql, static_cast<int>(params.size())); !st) throw PgFailure(st.error());
    it = names_.emplace(sql, std::move(name)).first;
  }
  auto rows = c_.exec_prepared(it->second, params);
  if (!rows) throw PgFailure(rows.error());
  return std::move(*rows);
}

Rows Session::simple(const std::string& sql) {
  auto rows = c_.exec(sql);
  if (!rows) throw PgFailure(rows.error());
  return std::move(*rows);
}

std::int64_t i64(const Rows& rows, int row, int col) {
  auto v = rows.get_int64(row, col);
  if (!v) throw PgFailure(PgError(v.error(), ""));
  return *v;
}

std::optional<std::int64_t> opt_i64(const Rows& rows, int row, int col) {
  if (rows.is_null(row, col)) return std::nullopt;
  return i64(rows, row, col);
}

std::string text(const Rows& rows, int row, int col) { return std::string(rows.get_text(row, col)); }

}  // namespace ratchet::store::pg
