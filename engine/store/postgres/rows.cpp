#include "store/postgres/rows.hpp"

#include <libpq-fe.h>

#include <charconv>
#include <string>

namespace ratchet::store::pg {

void Rows::Clear::operator()(pg_result* r) const noexcept { PQclear(r); }

int Rows::size() const noexcept { return result_ ? PQntuples(result_.get()) : 0; }

int Rows::columns() const noexcept { return result_ ? PQnfields(result_.get()) : 0; }

std::optional<int> Rows::column(std::string_view name) const noexcept {
  for (int c = 0; c < columns(); ++c) {
    if (name == PQfname(result_.get(), c)) return c;
  }
  return std::nullopt;
}

bool Rows::is_null(int row, int col) const noexcept {
  if (row < 0 || row >= size() || col < 0 || col >= columns()) return true;
  return PQgetisnull(result_.get(), row, col) != 0;
}

std::string_view Rows::get_text(int row, int col) const noexcept {
  if (is_null(row, col)) return {};
  return {PQgetvalue(result_.get(), row, col),
          static_cast<std::size_t>(PQgetlength(result_.get(), row, col))};
}

std::optional<std::string_view> Rows::get_optional_text(int row, int col) const noexcept {
  if (is_null(row, col)) return std::nullopt;
  return get_text(row, col);
}

Result<std::int64_t> Rows::get_int64(int row, int col) const {
  auto where = [&] {
    const char* name = (col >= 0 && col < columns()) ? PQfname(result_.get(), col) : "?";
    return "row " + std::to_string(row) + ", column " + std::to_string(col) + " (" + name + ")";
  };
  if (is_null(row, col)) return fail(Error::database("expected an integer at " + where() + ", got NULL"));
  const std::string_view text = get_text(row, col);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return fail(Error::database("expected an integer at " + where() + ", got '" + std::string(text) + "'"));
  }
  return value;
}

std::int64_t Rows::affected() const noexcept {
  if (!result_) return 0;
  const char* text = PQcmdTuples(result_.get());
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text, text + std::char_traits<char>::length(text), value);
  return ec == std::errc{} ? value : 0;
}

}  // namespace ratchet::store::pg
