#include "store/sqlite/database.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <cerrno>
#include <cstring>
#include <string>

#include "store/sqlite/schema.hpp"

namespace ratchet::store {
namespace {

std::string quoted(const std::filesystem::path& p) { return "\"" + p.string() + "\""; }

int sqlite_code(const std::exception& e) {
  if (const auto* se = dynamic_cast<const SQLite::Exception*>(&e)) return se->getErrorCode() & 0xff;
  return -1;
}

// Creates a missing database file with owner-only permissions before SQLite
// opens it (SQLite would use the umask, and the file holds job arguments).
Status create_private_file(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return {};
    return fail(Error::database("cannot create database " + quoted(path) + ": " + std::strerror(errno) +
                                "; check that the folder exists and is writable"));
  }
  ::close(fd);
  return {};
}

}  // namespace

int schema_version() noexcept { return migrations().back().version; }

Error database_error(const std::filesystem::path& path, std::string_view doing, const std::exception& e) {
  std::string what = e.what();
  std::string m = "database " + quoted(path) + ": " + std::string(doing) + " failed: ";
  switch (sqlite_code(e)) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      m += "the database is locked by another process (" + what +
           "); wait for it to finish, stop it, or raise the busy timeout";
      break;
    case SQLITE_PROTOCOL:
      m += "another process held the WAL index's locks past SQLite's tries (" + what +
           "), as while it recovers the index after a crash; it is tried again while a lease lasts";
      break;
    case SQLITE_NOTADB:
      m += "the file is not a ratchet database (" + what +
           "); point the engine at another file or move this one away";
      break;
    case SQLITE_CORRUPT:
      m += "the database is corrupt (" + what + "); restore it from a backup or move it away";
      break;
    case SQLITE_READONLY:
      m += "the database is read-only (" + what + "); make the file and its folder writable";
      break;
    case SQLITE_CANTOPEN:
      m += "cannot open the file (" + what + "); check that its folder exists and is writable";
      break;
    case SQLITE_FULL: m += "the disk is full (" + what + "); free some space"; break;
    case SQLITE_IOERR: {
      const auto* se = dynamic_cast<const SQLite::Exception*>(&e);
      const int extended = se != nullptr ? se->getExtendedErrorCode() : 0;
      if (extended == SQLITE_IOERR_WRITE || extended == SQLITE_IOERR_TRUNCATE) {
        // A write() refused with ENOSPC or EFBIG reaches SQLite as this.
        m += "writing to the disk failed (" + what +
             "): the disk is full, a file size limit (ulimit -f) was reached, or the disk is failing; "
             "free some space or check the disk";
      } else {
        m += "an I/O error occurred (" + what + "); check the disk";
      }
      break;
    }
    default: m += what; break;
  }
  return Error::database(std::move(m));
}

Result<std::unique_ptr<SQLite::Database>> open_database(const DatabaseOptions& options) {
  const std::filesystem::path& path = options.path;
  std::error_code ec;
  bool exists = std::filesystem::exists(path, ec);
  if (!exists) {
    if (!options.migrate) return fail(Error::database("database " + quoted(path) + " does not exist"));
    if (auto st = create_private_file(path); !st) return fail(st.error());
  } else {
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) {
      return fail(Error::database("cannot read database " + quoted(path) + ": " + std::strerror(errno)));
    }
    if (!S_ISREG(sb.st_mode)) {
      return fail(
          Error::database("database " + quoted(path) + " is not a regular file; point the engine at a file"));
    }
    // Checked by mode bits as well as access(): a privileged process could
    // write anyway, but a file made read-only says "do not touch".
    if ((sb.st_mode & S_IWUSR) == 0 || ::access(path.c_str(), W_OK) != 0) {
      return fail(Error::database("database " + quoted(path) +
                                  " is read-only; make it writable (chmod u+w) or use another file"));
    }
  }

  try {
    auto db = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_NOMUTEX,
                                                 static_cast<int>(options.busy_timeout.count()));
    // Read before any write: a file that is not a database, not ratchet's
    // or too new is refused untouched. One statement, one snapshot: a file
    // another process is migrating has its tables and its version together.
    int version = 0;
    std::string tables;
    {
      SQLite::Statement q(*db,
                          "SELECT (SELECT user_version FROM pragma_user_version), (SELECT "
                          "COALESCE(group_concat(name, ', '), '') FROM (SELECT name FROM sqlite_master WHERE "
                          "type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name))");
      q.executeStep();
      version = q.getColumn(0).getInt();
      tables = q.getColumn(1).getString();
    }
    // Ratchet sets the version with its first tables, in one transaction:
    // tables without a version are someone else's.
    if (version == 0 && !tables.empty()) {
      return fail(Error::database("database " + quoted(path) + " holds tables ratchet did not create (" +
                                  tables +
                                  ") and no ratchet schema version: it is not a ratchet database; point the "
                                  "engine at another file or move this one away"));
    }
    if (version > schema_version()) {
      return fail(Error::database(
          "database " + quoted(path) + " was written by a newer ratchet (schema version " +
          std::to_string(version) + ", this build knows up to " + std::to_string(schema_version()) +
          "); upgrade ratchet or use another database file"));
    }
    std::string mode = db->execAndGet("PRAGMA journal_mode=WAL").getString();
    if (mode != "wal") {
      return fail(Error::database("database " + quoted(path) +
                                  " cannot use write-ahead logging (journal mode is " + mode +
                                  "); put it on a local file system"));
    }
    db->exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    db->exec("PRAGMA foreign_keys=OFF");
    db->exec("PRAGMA temp_store=MEMORY");
    if (options.migrate) {
      for (const Migration& m : migrations()) {
        if (m.version <= version) continue;
        SQLite::Transaction tx(*db, SQLite::TransactionBehavior::IMMEDIATE);
        // Another process may have migrated while we waited for the lock.
        int now_version = db->execAndGet("PRAGMA user_version").getInt();
        if (now_version >= m.version) {
          version = now_version;
          continue;
        }
        db->exec(m.sql);
        db->exec("PRAGMA user_version=" + std::to_string(m.version));
        tx.commit();
        version = m.version;
      }
    }
    return db;
  } catch (const std::exception& e) {
    return fail(database_error(path, "opening", e));
  }
}

}  // namespace ratchet::store
