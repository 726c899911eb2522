#include "web/web_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <thread>

#include "bounded_server.hpp"
#include "metrics.hpp"
#include "ratchet/version.hpp"
#include "web/access.hpp"
#include "web/api.hpp"
#include "web/assets.hpp"

namespace ratchet::cli::web {

namespace {

constexpr const char* kCookie = "ratchet_session";
constexpr const char* kCsrfHeader = "X-Ratchet-CSRF";

void send(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  // Text from outside (a plugin file's name, a server's error) may be any
  // bytes: invalid UTF-8 is shown as U+FFFD rather than failing the answer.
  res.set_content(reply.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void send_error(httplib::Response& res, int status, std::string message) {
  send(res, error_reply(status, std::move(message)));
}

// Pages a browser opens before it has a session get a page that says how
// to log in rather than raw JSON.
void refuse_page(httplib::Response& res) {
  res.status = 401;
  res.set_content(
      "<!doctype html><meta charset=utf-8><title>ratchet: not logged in</title>"
      "<p>Not logged in: open the login link <code>ratchet web</code> printed, or "
      "<code>/login?token=TOKEN</code> with the token it was given.</p>",
      "text/html; charset=utf-8");
}

}  // namespace

struct WebServer::Impl {
  Impl(const WebOptions& o, Engine& e)
      : options(o),
        engine(e),
        access(Access::Options{.token = o.token, .session_life = o.session_life}),
        server(BoundedServerOptions{.timeout = o.timeout}) {}

  WebOptions options;
  Engine& engine;
  Access access;
  ActivityCache activity;
  BoundedServer server;
  std::string host;
  int port = 0;
  bool loopback = false;
  std::vector<std::string> plugins;

  std::string origin() const {
    return host.find(':') != std::string::npos && host.front() != '['
               ? fmt::format("http://[{}]:{}", host, port)
               : fmt::format("http://{}:{}", host, port);
  }

  // Sends the refusal and returns false unless the request may go on.
  bool admit(const httplib::Request& req, httplib::Response& res) {
    const std::string& path = req.path;
    if (path == "/login" && req.method == "GET") return true;
    if (path == "/metrics" && loopback) return true;
    auto caller =
        access.identify(req.get_header_value("Authorization"),
                        cookie_value(req.get_header_value("Cookie"), kCookie), Access::Clock::now());
    const bool api = path.starts_with("/api/") || path == "/metrics";
    if (caller.via == Access::Via::kNone) {
      if (api) {
        send_error(res, 401,
                   "no valid credential: send Authorization: Bearer TOKEN, or log in with the link "
                   "`ratchet web` printed");
      } else {
        refuse_page(res);
      }
      return false;
    }
    if (req.method == "GET" || req.method == "HEAD") return true;
    if (options.read_only) {
      send_error(res, 403, "this dashboard is read-only (ratchet web --read-only): actions are refused");
      return false;
    }
    if (caller.via == Access::Via::kSession) {
      if (!same_secret(req.get_header_value(kCsrfHeader), caller.csrf)) {
        send_error(res, 403,
                   "missing or wrong X-Ratchet-CSRF header: take the token from GET /api/v1/session");
        return false;
      }
      // A browser names the page's origin; one from another site is refused
      // even with the right token, should that ever leak.
      if (req.has_header("Origin") && req.get_header_value("Origin") != origin() &&
          req.get_header_value("Origin") != "http://" + req.get_header_value("Host")) {
        send_error(res, 403, "a request from another origin is refused");
        return false;
      }
    }
    return true;
  }

  void routes() {
    server.admit([this](const httplib::Request& req, httplib::Response& res) {
      // Nothing here may be framed or sniffed as another type by a browser.
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("X-Frame-Options", "DENY");
      res.set_header("Referrer-Policy", "no-referrer");
      res.set_header("Cache-Control", "no-store");
      return admit(req, res) ? httplib::Server::HandlerResponse::Unhandled
                             : httplib::Server::HandlerResponse::Handled;
    });

    server.Get("/login", [this](const httplib::Request& req, httplib::Response& res) {
      auto id = access.login(req.get_param_value("token"), req.get_param_value("code"), Access::Clock::now());
      if (!id) {
        res.status = 401;
        res.set_content(
            "<!doctype html><meta charset=utf-8><title>ratchet: login refused</title>"
            "<p>This login link is not valid: a link works once, and a token must be the one "
            "<code>ratchet web</code> was given. Restart <code>ratchet web</code> for a new link.</p>",
            "text/html; charset=utf-8");
        return;
      }
      res.set_header("Set-Cookie", fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
                                               kCookie, *id, access.session_life().count()));
      // Away from the URL that holds the code or token, so it is neither
      // kept in the history nor sent on.
      res.set_redirect("/", 303);
    });

    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      // Calls as the running engines reported them: this process makes none.
      MetricsInput input;
      if (auto counts = engine.counts()) input.jobs = std::move(*counts);
      input.calls = summed_calls(engine_reports(engine), engine.now());
      input.plugins = plugins;
      res.set_content(render_metrics(input), "text/plain; version=0.0.4");
    });

    server.Get("/api/v1/session", [this](const httplib::Request& req, httplib::Response& res) {
      auto caller =
          access.identify(req.get_header_value("Authorization"),
                          cookie_value(req.get_header_value("Cookie"), kCookie), Access::Clock::now());
      send(res, {200,
                 {{"read_only", options.read_only},
                  {"csrf", caller.csrf},
                  {"database", engine.database()},
                  {"version", std::string(kHeaderVersion)}}});
    });
    server.Get("/api/v1/overview", [this](const httplib::Request&, httplib::Response& res) {
      send(res, overview(engine, engine.now(), &activity));
    });
    server.Get("/api/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      std::string bad;
      auto params = parse_query(req.target, bad);
      if (!params) {
        send_error(res, 400,
                   "unknown parameter \"" + bad +
                       "\": the jobs list takes state, type, queue, id, q, before and limit");
        return;
      }
      send(res, list_jobs(engine, *params));
    });
    server.Get(R"(/api/v1/jobs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, show_job(engine, req.matches[1]));
    });
    server.Post(R"(/api/v1/jobs/([^/]+)/retry)", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, retry_job(engine, req.matches[1]));
    });
    server.Post(R"(/api/v1/jobs/([^/]+)/cancel)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  send(res, cancel_job(engine, req.matches[1]));
                });
    server.Post("/api/v1/jobs/retry", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, retry_matching(engine, req.body));
    });
    server.Post("/api/v1/jobs/purge", [this](const httplib::Request& req, httplib::Response& res) {
      activity.clear();
      send(res, purge(engine, req.body));
    });
    server.Get("/api/v1/plugins", [this](const httplib::Request&, httplib::Response& res) {
      send(res, web::plugins(engine, engine.now()));
    });
    server.Get("/api/v1/limits", [this](const httplib::Request&, httplib::Response& res) {
      send(res, web::limits(engine, engine.now()));
    });
    server.Get(R"(/[^/]*)", [](const httplib::Request& req, httplib::Response& res) {
      auto asset = find_asset(req.path);
      if (!asset) {
        res.status = 404;
        res.set_content("not found", "text/plain");
        return;
      }
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                     "connect-src 'self'; frame-ancestors 'none'");
      res.set_content(std::string(asset->body), std::string(asset->content_type));
    });
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      // A request line too long to read (414) has no path to tell by.
      if (!req.path.starts_with("/api/") && res.status != 414) return;
      // The API answers JSON whatever refused the request: the server's own
      // refusals before routing (411, 413, 403) are text, and statuses no
      // handler set (an unknown path, httplib's 414) have no body yet.
      if (!res.body.empty()) {
        if (!res.get_header_value("Content-Type").starts_with("text/plain")) return;
        std::string text = res.body;
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
        send_error(res, res.status, std::move(text));
        return;
      }
      send_error(res, res.status,
                 res.status == 404
                     ? fmt::format("no such endpoint: {} {} (see docs/web.md)", req.method, req.path)
                 : res.status == 414 ? std::string("the request's URI is too long")
                                     : fmt::format("HTTP {}", res.status));
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
      }
      spdlog::error("web: {}", what);
      send_error(res, 500, "internal error: " + what);
    });
  }
};

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebServer::~WebServer() { impl_->server.halt(); }

int WebServer::port() const noexcept { return impl_->port; }

std::string WebServer::origin() const { return impl_->origin(); }

std::string WebServer::login_link() { return origin() + "/login?code=" + impl_->access.new_login_code(); }

Result<std::unique_ptr<WebServer>> WebServer::start(std::string_view address, Engine& engine,
                                                    WebOptions options) {
  auto at = BoundedServer::parse_address(address, "--listen", "127.0.0.1:8077");
  if (!at) return fail(at.error());
  auto impl = std::make_unique<Impl>(options, engine);
  impl->host = at->host;
  impl->loopback = is_loopback(at->host);
  for (const auto& p : engine.plugins().loaded) {
    if (p.configured) impl->plugins.push_back(p.name);
  }
  impl->routes();
  auto port = impl->server.serve(*at, "--listen");
  if (!port) return fail(port.error());
  impl->port = *port;
  return std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
}

}  // namespace ratchet::cli::web
