// Logging for the ratchet command: spdlog's default logger (which the engine
// logs through too) writes to stderr, as text or one JSON object per line,
// at the level asked for. On a terminal it shares stderr with the live
// progress line: a log line clears the progress line, prints, and the
// progress line is drawn again.
//
// Thread-safety: the sink and the status line lock one mutex; log from any
// thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "ratchet/status.hpp"

namespace ratchet::cli {

enum class LogFormat { kText, kJson };

// The live line at the bottom of a terminal. Without a terminal, set() only
// remembers the text.
class StatusLine {
 public:
  explicit StatusLine(bool terminal) : terminal_(terminal) {}
  bool terminal() const { return terminal_; }
  // Replaces the line and redraws it in place.
  void set(std::string text);
  // Ends the line (a newline) so later output starts on a fresh line.
  void finish();

  // For the log sink: clear the line, write `text`, draw the line again.
  void write_above(std::string_view text);

 private:
  std::mutex mu_;
  const bool terminal_;
  std::string line_;
  bool drawn_ = false;
};

// Installs the default logger. `level` is trace, debug, info, warn, error
// or off. The status line may be null.
Status setup_logging(std::string_view level, LogFormat format, std::shared_ptr<StatusLine> status);

}  // namespace ratchet::cli
