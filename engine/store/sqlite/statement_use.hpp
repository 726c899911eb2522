// One use of a cached SQLite statement: reset with its bindings cleared on
// entry, and reset again when the scope ends, so no cached statement keeps a
// read snapshot open between uses.
#pragma once

#include <SQLiteCpp/Statement.h>

namespace ratchet::store {

class Use {
 public:
  explicit Use(SQLite::Statement& s) : s_(s) {
    s_.reset();
    s_.clearBindings();
  }
  ~Use() { s_.tryReset(); }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  SQLite::Statement* operator->() { return &s_; }
  SQLite::Statement& operator*() { return s_; }

 private:
  SQLite::Statement& s_;
};

}  // namespace ratchet::store
