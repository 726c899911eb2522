// Who may use the dashboard. Every request but the login needs a credential:
//
// - the access token (`--token-env NAME`), sent as `Authorization: Bearer`;
// - or a session cookie, set by GET /login with the token or with a
//   one-time login code (the link `ratchet web` prints when no token is
//   configured). A session lasts `session_life` and lives in this process's
//   memory only, so a restart of the server logs everyone out.
//
// A session comes with its own CSRF token: a state-changing request made
// with the cookie must carry it (a page of another site can make the
// browser send the cookie, but cannot read the token). A bearer token is
// never sent by a browser on its own, so it needs none.
//
// Secrets (the token, the codes, session ids, CSRF tokens) are compared in
// constant time and never logged.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ratchet::cli::web {

// 32 random bytes from the kernel's CSPRNG, as 64 hex digits.
std::string random_secret();

// Whether two secrets are equal, in a time that depends on their lengths only.
bool same_secret(std::string_view a, std::string_view b) noexcept;

class Access {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::string token;  // empty: none (log in with a code only)
    std::chrono::seconds session_life{std::chrono::hours(12)};
    // The oldest session is dropped beyond this many, so a client that logs
    // in in a loop cannot grow the server's memory.
    std::size_t max_sessions = 1000;
  };
  explicit Access(Options options);

  // A new one-time login code.
  std::string new_login_code();

  enum class Via { kNone, kBearer, kSession };
  struct Caller {
    Via via = Via::kNone;
    std::string csrf;  // the session's CSRF token (kSession only)
  };
  // Who sends a request with this Authorization header and session cookie
  // (the value of `ratchet_session`, empty when absent).
  Caller identify(std::string_view authorization, std::string_view session, Clock::time_point now);

  // A login with `token` or `code` (one of them empty): the new session's
  // id, or nullopt when neither is valid. A code works once.
  std::optional<std::string> login(std::string_view token, std::string_view code, Clock::time_point now);

  std::chrono::seconds session_life() const { return options_.session_life; }

 private:
  struct Session {
    std::string csrf;
    Clock::time_point expires;
  };
  void drop_expired(Clock::time_point now);

  const Options options_;
  std::mutex mu_;
  std::unordered_set<std::string> codes_;
  std::unordered_map<std::string, Session> sessions_;
};

// The value of cookie `name` in a Cookie header; empty when absent.
std::string cookie_value(std::string_view header, std::string_view name);

}  // namespace ratchet::cli::web
