// One timeline per boot for every process sharing the database
// (ratchet/clock.hpp says why).
#include "store/sqlite/sqlite_job_store.hpp"
#include "store/sqlite/statement_use.hpp"

namespace ratchet::store {

std::optional<std::int64_t> SqliteJobStore::stored_clock_base(const std::string& boot_id) {
  Use get(stmt("SELECT base_ns FROM machine_clock WHERE boot_id = ?"));
  get->bind(1, boot_id);
  if (get->executeStep()) return get->getColumn(0).getInt64();
  return std::nullopt;
}

std::int64_t SqliteJobStore::machine_clock_base(const std::string& boot_id, std::int64_t wall_base_ns) {
  if (auto stored = stored_clock_base(boot_id)) return *stored;
  Use drop(stmt("DELETE FROM machine_clock"));
  drop->exec();
  Use put(stmt("INSERT INTO machine_clock(boot_id, base_ns) VALUES (?, ?)"));
  put->bind(1, boot_id);
  put->bind(2, wall_base_ns);
  put->exec();
  return wall_base_ns;
}

}  // namespace ratchet::store
