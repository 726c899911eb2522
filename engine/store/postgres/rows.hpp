// The result of one statement: rows of text-format values, read by row and
// column index, and how many rows a write touched.
//
// Ownership: Rows owns libpq's result and frees it; the string_views it
// hands out live as long as the Rows. Movable, not copyable; safe to read
// from several threads, not to move while being read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "ratchet/status.hpp"

struct pg_result;  // libpq's PGresult; only store/postgres includes libpq

namespace ratchet::store::pg {

class Rows {
 public:
  Rows() = default;
  // Takes ownership of `result` (may be null: no rows).
  explicit Rows(pg_result* result) noexcept : result_(result) {}

  int size() const noexcept;
  int columns() const noexcept;
  // The index of the column named `name`, if the result has one.
  std::optional<int> column(std::string_view name) const noexcept;

  // True for SQL NULL and for a row or column out of range.
  bool is_null(int row, int col) const noexcept;
  // The value as the server sent it; empty for NULL (see is_null).
  std::string_view get_text(int row, int col) const noexcept;
  std::optional<std::string_view> get_optional_text(int row, int col) const noexcept;
  // A bigint/integer value; an Error (kDatabase) names the column when the
  // value is NULL or not an integer.
  [[nodiscard]] Result<std::int64_t> get_int64(int row, int col) const;

  // Rows inserted, updated, deleted (or selected) by the statement; 0 for
  // statements that report none (CREATE, BEGIN, ...).
  std::int64_t affected() const noexcept;

 private:
  struct Clear {
    void operator()(pg_result* r) const noexcept;
  };
  std::unique_ptr<pg_result, Clear> result_;
};

}  // namespace ratchet::store::pg
