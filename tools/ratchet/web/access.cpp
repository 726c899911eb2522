#include "web/access.hpp"

#include <openssl/crypto.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>

namespace ratchet::cli::web {

std::string random_secret() {
  std::array<unsigned char, 32> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // No secret is better than a guessable one: the server does not start.
      throw std::runtime_error("the kernel's random source (getrandom) failed");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

bool same_secret(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Access::Access(Options options) : options_(std::move(options)) {}

std::string Access::new_login_code() {
  std::string code = random_secret();
  std::lock_guard lock(mu_);
  codes_.insert(code);
  return code;
}

void Access::drop_expired(Clock::time_point now) {
  std::erase_if(sessions_, [now](const auto& s) { return s.second.expires <= now; });
}

Access::Caller Access::identify(std::string_view authorization, std::string_view session,
                                Clock::time_point now) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!options_.token.empty() && authorization.starts_with(kBearer) &&
      same_secret(authorization.substr(kBearer.size()), options_.token)) {
    return {Via::kBearer, {}};
  }
  if (session.empty()) return {};
  std::lock_guard lock(mu_);
  // Looked up by hash, then compared in constant time: the lookup's timing
  // tells at most which bucket a guess falls in, not how much of it matched.
  auto it = sessions_.find(std::string(session));
  if (it == sessions_.end() || !same_secret(it->first, session)) return {};
  if (it->second.expires <= now) {
    sessions_.erase(it);
    return {};
  }
  return {Via::kSession, it->second.csrf};
}

std::optional<std::string> Access::login(std::string_view token, std::string_view code,
                                         Clock::time_point now) {
  bool ok = !token.empty() && !options_.token.empty() && same_secret(token, options_.token);
  std::lock_guard lock(mu_);
  if (!ok && !code.empty()) {
    auto it = codes_.find(std::string(code));
    if (it != codes_.end() && same_secret(*it, code)) {
      codes_.erase(it);
      ok = true;
    }
  }
  if (!ok) return std::nullopt;
  drop_expired(now);
  while (sessions_.size() >= options_.max_sessions) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](const auto& a, const auto& b) {
      return a.second.expires < b.second.expires;
    });
    sessions_.erase(oldest);
  }
  std::string id = random_secret();
  sessions_[id] = Session{random_secret(), now + options_.session_life};
  return id;
}

std::string cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view part = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view{} : header.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    auto eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) return std::string(part.substr(eq + 1));
  }
  return {};
}

}  // namespace ratchet::cli::web
