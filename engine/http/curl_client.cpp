// The libcurl implementation of http::Client.
//
// Each request runs on a Transfer: an easy handle inside its own multi
// handle. The multi handle keeps the transfer's connections alive between
// requests (its connection cache) and lets a stop_token wake the transfer at
// once (curl_multi_wakeup) instead of at the next progress tick. Idle
// Transfers wait in a LIFO pool, so a sequence of requests keeps using the
// same warm connection and concurrent requests each get their own. The DNS
// cache and TLS sessions are shared by all Transfers of a client through a
// CURLSH; the connection cache is deliberately not shared, because libcurl
// does not support sharing connections between concurrent threads.
#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>

#include "http/client.hpp"
#include "http/url.hpp"

namespace ratchet::http {
namespace {

// ------------------------------------------------------------ RAII handles

struct EasyDeleter {
  void operator()(CURL* h) const noexcept { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* h) const noexcept { curl_multi_cleanup(h); }
};
struct ShareDeleter {
  void operator()(CURLSH* h) const noexcept { curl_share_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
struct UrlDeleter {
  void operator()(CURLU* u) const noexcept { curl_url_cleanup(u); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;
using ShareHandle = std::unique_ptr<CURLSH, ShareDeleter>;
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

// libcurl before 7.84 is not safe to initialise from two threads at once,
// and initialising twice is wasted work: once per process, never cleaned up
// (other libraries in the process may still use curl at exit).
CURLcode global_init() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return rc;
}

// The CURLSH and the mutexes its lock callbacks take, one per kind of data.
class SharedCaches {
 public:
  static std::unique_ptr<SharedCaches> create() {
    auto s = std::unique_ptr<SharedCaches>(new SharedCaches());
    s->share_.reset(curl_share_init());
    if (!s->share_) return nullptr;
    CURLSH* h = s->share_.get();
    if (curl_share_setopt(h, CURLSHOPT_LOCKFUNC, &SharedCaches::lock) != CURLSHE_OK ||
        curl_share_setopt(h, CURLSHOPT_UNLOCKFUNC, &SharedCaches::unlock) != CURLSHE_OK ||
        curl_share_setopt(h, CURLSHOPT_USERDATA, s.get()) != CURLSHE_OK ||
        curl_share_setopt(h, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(h, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
      return nullptr;
    }
    return s;
  }

  CURLSH* get() const noexcept { return share_.get(); }

 private:
  SharedCaches() = default;

  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<SharedCaches*>(self)->mutex_for(data).lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<SharedCaches*>(self)->mutex_for(data).unlock();
  }
  std::mutex& mutex_for(curl_lock_data data) noexcept {
    const auto i = static_cast<std::size_t>(data);
    return mutexes_[i < mutexes_.size() ? i : 0];
  }

  std::array<std::mutex, CURL_LOCK_DATA_LAST> mutexes_;
  ShareHandle share_;  // declared last: cleaned up while the mutexes still exist
};

// One easy handle in its own multi handle. Declaration order matters: the
// easy handle is cleaned up before the multi handle that cached its
// connections.
struct Transfer {
  MultiHandle multi;
  EasyHandle easy;
};

// What the callbacks of one request fill in.
struct Sink {
  std::int64_t limit = 0;
  std::int64_t received = 0;  // header and body bytes
  bool too_large = false;
  int status = 0;  // of the latest response's status line
  // An error reply's body was cut at the limit: the reply is still one,
  // its status and headers whole (a 429 with a large HTML page is
  // throttling, not a failure of the call).
  bool body_cut = false;
  std::vector<Headers::Field> fields;  // of the latest response
  Response response;                   // status and body
};

// An error's body only says what went wrong; a reply's payload past the
// limit is the failure max_response_bytes exists for.
bool is_error_status(int status) { return status >= 400; }

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const auto bytes = static_cast<std::int64_t>(size * n);
  if (sink->received + bytes > sink->limit) {
    if (is_error_status(sink->status)) {
      const auto room = static_cast<std::size_t>(std::max<std::int64_t>(0, sink->limit - sink->received));
      sink->response.body.append(data, std::min(room, size * n));
      sink->received += static_cast<std::int64_t>(std::min(room, size * n));
      sink->body_cut = true;
    } else {
      sink->too_large = true;
    }
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  sink->received += bytes;
  sink->response.body.append(data, size * n);
  return size * n;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const auto bytes = static_cast<std::int64_t>(size * n);
  if (sink->received + bytes > sink->limit) {
    sink->too_large = true;
    return 0;
  }
  sink->received += bytes;
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    // A new response begins (after a redirect or a 1xx): only the final
    // response's fields are reported.
    sink->fields.clear();
    sink->status = 0;
    const auto space = line.find(' ');
    if (space != std::string_view::npos) {
      const std::string_view code = line.substr(space + 1, 3);
      std::from_chars(code.data(), code.data() + code.size(), sink->status);
    }
    return size * n;
  }
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
    // An obsolete folded continuation line belongs to the previous field.
    if (!sink->fields.empty() && !trim(line).empty()) {
      sink->fields.back().second += ' ';
      sink->fields.back().second += trim(line);
    }
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    sink->fields.emplace_back(std::string(trim(line.substr(0, colon))),
                              std::string(trim(line.substr(colon + 1))));
  }
  return size * n;
}

bool valid_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

bool has_line_break(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// Appends one line; on allocation failure the list is left as it was.
bool append(Slist& list, const std::string& line) {
  curl_slist* head = curl_slist_append(list.get(), line.c_str());
  if (head == nullptr) return false;
  if (!list) list.reset(head);
  return true;
}

TransportError::Kind classify(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE: return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT: return TransportError::kTimeout;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED: return TransportError::kTls;
    case CURLE_FILESIZE_EXCEEDED: return TransportError::kTooLarge;
    case CURLE_TOO_MANY_REDIRECTS: return TransportError::kTooManyRedirects;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return TransportError::kInvalidUrl;
    default: return TransportError::kOther;
  }
}

// curl's own explanation, with the request's query string cut out should
// libcurl ever echo the URL: the query is where API keys travel.
std::string curl_detail(const char* errbuf, CURLcode rc, const std::string& url) {
  std::string detail = (errbuf != nullptr && errbuf[0] != '\0') ? errbuf : curl_easy_strerror(rc);
  const auto q = url.find('?');
  if (q != std::string::npos && q + 1 < url.size()) {
    const std::string query = url.substr(q + 1);
    for (auto at = detail.find(query); at != std::string::npos; at = detail.find(query)) {
      detail.replace(at, query.size(), "...");
    }
  }
  return detail;
}

class CurlClient final : public Client {
 public:
  CurlClient(ClientOptions options, std::unique_ptr<SharedCaches> shared)
      : options_(std::move(options)), shared_(std::move(shared)) {}

  ~CurlClient() override {
    // Transfers hold the share; they go first.
    std::lock_guard lock(mu_);
    idle_.clear();
  }

  const ClientOptions& options() const noexcept override { return options_; }

  std::expected<Response, TransportError> perform(const Request& request, std::stop_token stop) override;

 private:
  class Hops;  // sends one request of a chain of redirects

  std::unique_ptr<Transfer> acquire();
  void release(std::unique_ptr<Transfer> t);

  const ClientOptions options_;
  std::unique_ptr<SharedCaches> shared_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Transfer>> idle_;  // most recently used last
};

std::unique_ptr<Transfer> CurlClient::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto t = std::move(idle_.back());
      idle_.pop_back();
      return t;
    }
  }
  auto t = std::make_unique<Transfer>();
  t->multi.reset(curl_multi_init());
  t->easy.reset(curl_easy_init());
  if (!t->multi || !t->easy) return nullptr;
  return t;
}

void CurlClient::release(std::unique_ptr<Transfer> t) {
  std::lock_guard lock(mu_);
  if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(t));
}

// scheme, host and port of an absolute URL (the port filled in when the URL
// leaves it out), or nullopt when it is not one.
struct Origin {
  std::string scheme;
  std::string host;
  std::string port;
  friend bool operator==(const Origin&, const Origin&) = default;
};

std::optional<Origin> origin_of(const std::string& url) {
  UrlHandle u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return std::nullopt;
  Origin o;
  for (auto [part, out, flags] :
       {std::tuple{CURLUPART_SCHEME, &o.scheme, 0u}, std::tuple{CURLUPART_HOST, &o.host, 0u},
        std::tuple{CURLUPART_PORT, &o.port, static_cast<unsigned>(CURLU_DEFAULT_PORT)}}) {
    char* text = nullptr;
    if (curl_url_get(u.get(), part, &text, flags) != CURLUE_OK) return std::nullopt;
    *out = text;
    curl_free(text);
  }
  for (auto& c : o.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Credentials that never go to another origin, whatever the request says.
bool credential_header(std::string_view name) {
  return iequals(name, "Authorization") || iequals(name, "Proxy-Authorization") || iequals(name, "Cookie");
}

// One request of a chain of redirects.
struct Hop {
  std::string method;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The first hop's Request::before_send; null for the hops after it.
  const std::function<std::optional<std::string>()>* before_send = nullptr;
};

// Request::before_send, asked from libcurl's pre-request callback.
struct SendCheck {
  const std::function<std::optional<std::string>()>* ask = nullptr;
  std::optional<std::string> held;  // the reason it gave to hold the request back
};

int on_prereq(void* user, char* /*primary_ip*/, char* /*local_ip*/, int /*primary_port*/,
              int /*local_port*/) {
  auto* check = static_cast<SendCheck*>(user);
  try {
    check->held = (*check->ask)();
  } catch (...) {
    // Nothing may unwind through libcurl; not knowing is no reason to send.
    check->held = "the check before sending failed";
  }
  return check->held ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

// What one hop came to: a response, and where it redirects to, if anywhere.
struct HopReply {
  Response response;
  std::optional<std::string> location;
};

class CurlClient::Hops {
 public:
  Hops(CurlClient& client, std::stop_token stop) : client_(client), stop_(std::move(stop)) {}
  std::expected<HopReply, TransportError> send(const Hop& hop, std::chrono::milliseconds timeout,
                                               const std::string& where);

 private:
  CurlClient& client_;
  std::stop_token stop_;
};

std::expected<HopReply, TransportError> CurlClient::Hops::send(const Hop& hop,
                                                               std::chrono::milliseconds timeout,
                                                               const std::string& where) {
  const ClientOptions& options = client_.options_;
  auto fail_with = [&](TransportError::Kind kind, std::string_view what) {
    return std::unexpected(TransportError{kind, where + ": " + std::string(what)});
  };
  Slist header_list;
  for (const auto& [name, value] : hop.headers) {
    // "Name;" is how curl sends a header with an empty value.
    const std::string line = value.empty() ? name + ";" : name + ": " + value;
    if (!append(header_list, line))
      return fail_with(TransportError::kOther, "out of memory building headers");
  }
  // curl would otherwise wait for a 100-continue before sending larger bodies.
  if (!append(header_list, "Expect:"))
    return fail_with(TransportError::kOther, "out of memory building headers");

  if (stop_.stop_requested()) return fail_with(TransportError::kCancelled, "cancelled before it was sent");
  // libcurl reads a timeout of 0 as none: a budget spent to under 1 ms (the
  // end of a retry deadline) would wait forever on a server that never answers.
  if (timeout < std::chrono::milliseconds(1)) {
    return fail_with(TransportError::kTimeout,
                     "timed out before it was sent: less than 1 ms of its time budget was left");
  }

  auto transfer = client_.acquire();
  if (!transfer) return fail_with(TransportError::kOther, "libcurl could not create a handle");
  CURL* easy = transfer->easy.get();
  CURLM* multi = transfer->multi.get();
  curl_easy_reset(easy);

  Sink sink;
  sink.limit = options.max_response_bytes;
  char errbuf[CURL_ERROR_SIZE] = {};
  const auto connect_timeout = std::min(options.connect_timeout, timeout);

  bool ok = true;
  auto set = [&](CURLoption opt, auto value) { ok = ok && curl_easy_setopt(easy, opt, value) == CURLE_OK; };
  set(CURLOPT_SHARE, client_.shared_->get());
  set(CURLOPT_URL, hop.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_ERRORBUFFER, errbuf);
  set(CURLOPT_HTTPHEADER, header_list.get());
  set(CURLOPT_USERAGENT, options.user_agent.c_str());
  if (options.accept_compression) set(CURLOPT_ACCEPT_ENCODING, "");
  set(CURLOPT_TCP_KEEPALIVE, 1L);
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_response_bytes));
  // Redirects are followed by perform(), which decides what goes where.
  set(CURLOPT_FOLLOWLOCATION, 0L);
  set(CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  set(CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (options.ca_file) set(CURLOPT_CAINFO, options.ca_file->c_str());
  set(CURLOPT_WRITEFUNCTION, &on_body);
  set(CURLOPT_WRITEDATA, &sink);
  set(CURLOPT_HEADERFUNCTION, &on_header);
  set(CURLOPT_HEADERDATA, &sink);
  SendCheck check;
  if (hop.before_send && *hop.before_send) {
    check.ask = hop.before_send;
    set(CURLOPT_PREREQFUNCTION, &on_prereq);
    set(CURLOPT_PREREQDATA, &check);
  }
  const bool sends_body =
      !hop.body.empty() || hop.method == "POST" || hop.method == "PUT" || hop.method == "PATCH";
  if (hop.method == "HEAD") {
    set(CURLOPT_NOBODY, 1L);
  } else if (hop.method == "GET" && !sends_body) {
    set(CURLOPT_HTTPGET, 1L);
  } else {
    if (hop.method != "POST") set(CURLOPT_CUSTOMREQUEST, hop.method.c_str());
    if (sends_body) {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(hop.body.size()));
      set(CURLOPT_POSTFIELDS, hop.body.data());
    }
  }
  if (!ok) {
    client_.release(std::move(transfer));
    return fail_with(TransportError::kOther, "libcurl refused an option (is libcurl older than 7.85?)");
  }

  if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
    return fail_with(TransportError::kOther, "libcurl could not start the transfer");
  }
  CURLcode result = CURLE_OK;
  bool cancelled = false;
  bool multi_failed = false;
  {
    // Wakes the poll below at once when the caller cancels. The callback is
    // gone (and finished) before the Transfer can go back to the pool.
    std::stop_callback wake(stop_, [multi] { curl_multi_wakeup(multi); });
    int running = 1;
    for (;;) {
      if (curl_multi_perform(multi, &running) != CURLM_OK) {
        multi_failed = true;
        break;
      }
      if (running == 0) break;
      if (stop_.stop_requested()) {
        cancelled = true;
        break;
      }
      if (curl_multi_poll(multi, nullptr, 0, 1000, nullptr) != CURLM_OK) {
        multi_failed = true;
        break;
      }
    }
    if (!cancelled && !multi_failed) {
      int queued = 0;
      bool done = false;
      while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
          result = msg->data.result;
          done = true;
        }
      }
      multi_failed = !done;
    }
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  std::optional<std::string> location;
  if (result == CURLE_OK && is_redirect(status)) {
    char* next = nullptr;
    if (curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &next) == CURLE_OK && next != nullptr) location = next;
  }
  curl_multi_remove_handle(multi, easy);
  client_.release(std::move(transfer));

  if (cancelled) return fail_with(TransportError::kCancelled, "cancelled while in flight");
  if (multi_failed) return fail_with(TransportError::kOther, "libcurl's transfer loop failed");
  if (check.held) return fail_with(TransportError::kHeldBack, "held back before it was sent: " + *check.held);
  // An error reply whose body is over the limit (read up to it, or never
  // read: its Content-Length said so) is returned with its body cut.
  const bool error_cut =
      sink.body_cut || (result == CURLE_FILESIZE_EXCEEDED && !sink.too_large && is_error_status(sink.status));
  if (result == CURLE_OK || error_cut) {
    sink.response.status = result == CURLE_OK ? static_cast<int>(status) : sink.status;
    sink.response.headers = Headers(std::move(sink.fields));
    if (error_cut) location.reset();
    return HopReply{std::move(sink.response), std::move(location)};
  }
  if (sink.too_large || result == CURLE_FILESIZE_EXCEEDED) {
    return fail_with(TransportError::kTooLarge, "the response is larger than the limit of " +
                                                    std::to_string(options.max_response_bytes) +
                                                    " bytes (max_response_bytes); the transfer was aborted");
  }
  const auto kind = classify(result);
  std::string what;
  switch (kind) {
    case TransportError::kConnect:
      // Refused or unresolved, nothing was sent; lost once connected, the
      // server may have received the request and acted on it.
      what = result == CURLE_COULDNT_CONNECT || result == CURLE_COULDNT_RESOLVE_HOST ||
                     result == CURLE_COULDNT_RESOLVE_PROXY
                 ? "could not connect"
                 : "the connection was lost before the reply was whole";
      break;
    case TransportError::kTimeout:
      what = "timed out (connect timeout " + std::to_string(connect_timeout.count()) + " ms, total " +
             std::to_string(timeout.count()) + " ms)";
      break;
    case TransportError::kTls: what = "TLS failed"; break;
    case TransportError::kInvalidUrl: what = "invalid URL"; break;
    default: what = "request failed"; break;
  }
  return fail_with(kind, what + ": " + curl_detail(errbuf, result, hop.url));
}

std::expected<Response, TransportError> CurlClient::perform(const Request& req, std::stop_token stop) {
  std::string where = req.method + " " + redact_url(req.url);
  auto fail_with = [&](TransportError::Kind kind, std::string_view what) {
    return std::unexpected(TransportError{kind, where + ": " + std::string(what)});
  };

  if (!valid_token(req.method)) {
    return fail_with(TransportError::kInvalidUrl, "the method is not a valid HTTP token");
  }
  auto origin = origin_of(req.url);
  if (!origin) return fail_with(TransportError::kInvalidUrl, "not a valid absolute URL");
  if (origin->scheme != "http" && origin->scheme != "https") {
    return fail_with(TransportError::kInvalidUrl, "only http and https URLs are allowed");
  }
  for (const auto& [name, value] : req.headers) {
    if (!valid_token(name)) {
      return fail_with(TransportError::kInvalidUrl, "header name '" + name + "' is not a valid HTTP token");
    }
    if (has_line_break(value)) {
      // The value itself is never printed: it may be a credential.
      return fail_with(TransportError::kInvalidUrl,
                       "the value of header '" + name + "' contains a line break");
    }
  }

  const auto timeout = req.timeout.value_or(options_.timeout);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Hop hop{req.method, req.url, req.headers, req.body, &req.before_send};
  Hops hops(*this, stop);
  for (int redirects = 0;; ++redirects) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      // libcurl reads a timeout of 0 as none: never hand it one.
      if (redirects == 0) {
        return fail_with(TransportError::kTimeout,
                         "timed out before it was sent: less than 1 ms of its time budget was left");
      }
      return fail_with(TransportError::kTimeout,
                       "timed out following redirects (total " + std::to_string(timeout.count()) + " ms)");
    }
    // The first hop has the whole budget, so its message names the timeout as set.
    auto reply = hops.send(hop, redirects == 0 ? timeout : left, where);
    if (!reply) return std::unexpected(std::move(reply.error()));
    if (!reply->location || options_.max_redirects == 0) return std::move(reply->response);
    if (redirects == options_.max_redirects) {
      return fail_with(TransportError::kTooManyRedirects,
                       "more than " + std::to_string(options_.max_redirects) + " redirects (max_redirects)");
    }
    const std::string next_url = std::move(*reply->location);
    auto next = origin_of(next_url);
    if (!next || (next->scheme != "http" && next->scheme != "https")) {
      return fail_with(TransportError::kInvalidUrl,
                       "redirected to " + redact_url(next_url) + ", not an http or https URL");
    }
    if (origin->scheme == "https" && next->scheme == "http") {
      // What TLS protected (credentials, the body, the answer) would travel in the clear.
      return fail_with(TransportError::kTls, "refused the redirect from https to " + redact_url(next_url) +
                                                 ": it would give up TLS");
    }
    if (*next != *origin) {
      // Another origin (scheme, host or port) gets neither the caller's
      // credentials nor any header holding a secret, and never again on
      // later hops, even back to the first origin.
      std::erase_if(hop.headers, [&](const auto& h) {
        return credential_header(h.first) ||
               std::ranges::any_of(req.secret_headers,
                                   [&](const std::string& s) { return iequals(s, h.first); });
      });
      origin = std::move(next);
    }
    const int status = reply->response.status;
    // 303 always, and 301/302 after a POST (as browsers and curl do), go on
    // as a GET without the body; 307 and 308 repeat the request as it was.
    if ((status == 303 && hop.method != "HEAD") ||
        ((status == 301 || status == 302) && hop.method == "POST")) {
      hop.method = "GET";
      hop.body.clear();
      std::erase_if(hop.headers, [](const auto& h) {
        return iequals(h.first, "Content-Type") || iequals(h.first, "Content-Length");
      });
    }
    hop.url = next_url;
    hop.before_send = nullptr;
    where = req.method + " " + redact_url(req.url) + " (redirected to " + redact_url(hop.url) + ")";
  }
}

}  // namespace

Result<std::unique_ptr<Client>> Client::create(ClientOptions options) {
  if (options.timeout.count() <= 0) return fail(Error::invalid_argument("http client: timeout must be > 0"));
  if (options.connect_timeout.count() <= 0) {
    return fail(Error::invalid_argument("http client: connect_timeout must be > 0"));
  }
  if (options.max_response_bytes <= 0) {
    return fail(Error::invalid_argument("http client: max_response_bytes must be > 0"));
  }
  if (options.max_redirects < 0)
    return fail(Error::invalid_argument("http client: max_redirects must be >= 0"));
  if (options.max_idle_connections < 1) {
    return fail(Error::invalid_argument("http client: max_idle_connections must be >= 1"));
  }
  if (options.ca_file) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*options.ca_file, ec)) {
      return fail(Error::invalid_argument("http client: ca_file '" + options.ca_file->string() +
                                          "' is not a readable file; give a PEM bundle or leave it unset"));
    }
  }
  if (const CURLcode rc = global_init(); rc != CURLE_OK) {
    return fail(
        Error::internal(std::string("http client: curl_global_init failed: ") + curl_easy_strerror(rc)));
  }
  auto shared = SharedCaches::create();
  if (!shared) return fail(Error::internal("http client: libcurl could not create a share handle"));
  return std::make_unique<CurlClient>(std::move(options), std::move(shared));
}

}  // namespace ratchet::http
