#include "log_setup.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "text.hpp"

namespace ratchet::cli {

void StatusLine::set(std::string text) {
  std::lock_guard lock(mu_);
  line_ = std::move(text);
  if (!terminal_) return;
  std::fprintf(stderr, "\r\033[K%s", line_.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void StatusLine::finish() {
  std::lock_guard lock(mu_);
  if (terminal_ && drawn_) std::fputs("\n", stderr);
  std::fflush(stderr);
  drawn_ = false;
  line_.clear();
}

void StatusLine::write_above(std::string_view text) {
  std::lock_guard lock(mu_);
  if (terminal_ && drawn_) std::fputs("\r\033[K", stderr);
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (terminal_ && drawn_) std::fputs(line_.c_str(), stderr);
  std::fflush(stderr);
}

namespace {

class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StderrSink(LogFormat format, std::shared_ptr<StatusLine> status)
      : format_(format), status_(std::move(status)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text;
    std::string_view payload(msg.payload.data(), msg.payload.size());
    auto level = spdlog::level::to_string_view(msg.level);
    std::string when = format_time(std::chrono::time_point_cast<Duration>(msg.time));
    if (format_ == LogFormat::kJson) {
      nlohmann::json j = {{"time", when},
                          {"level", std::string_view(level.data(), level.size())},
                          {"msg", payload},
                          {"pid", ::getpid()},
                          {"thread", msg.thread_id}};
      text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
      text = when + " " + std::string(level.data(), level.size()) + " " + std::string(payload) + "\n";
    }
    if (status_) {
      status_->write_above(text);
    } else {
      std::fwrite(text.data(), 1, text.size(), stderr);
    }
  }
  void flush_() override { std::fflush(stderr); }

 private:
  LogFormat format_;
  std::shared_ptr<StatusLine> status_;
};

}  // namespace

Status setup_logging(std::string_view level, LogFormat format, std::shared_ptr<StatusLine> status) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return fail(Error::invalid_argument("unknown log level \"" + std::string(level) +
                                        "\" (use trace, debug, info, warn, error or off)"));
  }
  auto logger = std::make_shared<spdlog::logger>("ratchet", std::make_shared<StderrSink>(format, status));
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace ratchet::cli
