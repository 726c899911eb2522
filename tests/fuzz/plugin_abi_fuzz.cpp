// Fuzz target: the host's side of the plugin ABI, where it reads what a
// plugin operation returned (status, retry-after, output buffer, JSON text).
// A fixture plugin (reply_plugin.c) returns whatever the input spells; see
// there for the input's layout.
//
// Invariants, beyond "never crashes":
//   - an unknown status, a NULL buffer with a size, a buffer host->alloc did
//     not hand out, or a size beyond the buffer is refused with an error
//     naming the plugin, its version and the operation;
//   - ok with JSON text gives that JSON (which encodes and decodes to
//     itself); ok with no output or with text that is not JSON is refused;
//   - a retryable, throttled or fatal status keeps the text as its message;
//   - retry_after is passed on as given;
//   - no error message carries a control or non-ASCII byte from the plugin.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include <stdlib.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/json_depth.hpp"

#include "fuzz_check.hpp"
#include "plugin_host/call.hpp"
#include "plugin_host/host_services.hpp"
#include "plugin_host/library.hpp"
#include "ratchet/clock.hpp"

namespace {

namespace ph = ratchet::plugin_host;

constexpr std::size_t kMaxOutput = 4096;  // small, so refused allocations are fuzzed too
constexpr std::string_view kWho = "plugin 'fuzz_reply' 1.0 operation 'reply'";

class NoServices final : public ph::HostServices {
 public:
  ph::HttpResult http(std::string_view, const ph::HttpRequest&) override {
    ph::HttpResult r;
    r.error = ph::HttpFailure::kOther;
    r.message = "no HTTP in this test";
    return r;
  }
  void log(std::string_view, ph::LogLevel, std::string_view) override {}
  bool cancelled() override { return false; }
};

// Loaded once per process and never unloaded (forked fuzzing children share
// it); the private copy is removed at once, since the code stays mapped.
std::shared_ptr<const ph::Library>* g_library = nullptr;

bool printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir_template[] = "/tmp/ratchet-fuzz-plugin-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  FUZZ_CHECK(dir != nullptr, std::string("cannot make a temporary folder"));
  const std::filesystem::path copy = std::filesystem::path(dir) / "fuzz_reply.so";
  auto lib = ph::load_library(RATCHET_FUZZ_REPLY_PLUGIN, copy);
  FUZZ_CHECK(lib.has_value(),
             "cannot load " RATCHET_FUZZ_REPLY_PLUGIN ": " + (lib ? "" : lib.error().reason));
  g_library = new std::shared_ptr<const ph::Library>(std::move(*lib));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (g_library == nullptr) LLVMFuzzerInitialize(nullptr, nullptr);
  const std::string input(reinterpret_cast<const char*>(data), size);

  ph::Invocation call;
  call.library = *g_library;
  call.operation = "reply";
  call.fn = call.library->find("reply");
  call.args = input;  // raw bytes: the fixture reads them as they are
  call.config = "{}";
  call.timeout = std::chrono::milliseconds(60000);
  call.max_output_bytes = kMaxOutput;
  NoServices services;
  ratchet::SystemClock clock;
  auto r = ph::invoke(std::move(call), services, clock);

  // What the fixture did with this input.
  const int status = size > 0 ? static_cast<signed char>(data[0]) : 0;
  const unsigned mode = size > 1 ? data[1] % 6u : 0u;
  std::string_view text = size > 3 ? std::string_view(input).substr(3) : std::string_view{};
  const bool allocated = mode == 0 || mode == 3 || mode == 5;
  const bool alloc_refused = allocated && text.size() > kMaxOutput;
  if (alloc_refused) text = {};  // nothing returned
  if (mode == 1 || mode == 5) text = {};
  if (mode == 4 && text.size() > 64) text = text.substr(0, 64);
  const std::string shown = "input of " + std::to_string(size) + " bytes, status " + std::to_string(status) +
                            ", mode " + std::to_string(mode);

  if (!r) {
    const std::string& m = r.error().message();
    FUZZ_CHECK(r.error().code() == ratchet::ErrorCode::kPlugin, shown + ": refused with another code: " + m);
    FUZZ_CHECK(m.find(kWho) != std::string::npos, shown + ": refusal does not name the plugin: " + m);
    FUZZ_CHECK(printable(m), shown + ": refusal carries raw bytes");
  }
  if (status < 0 || status > 3) {
    FUZZ_CHECK(!r && r.error().message().find("unknown status") != std::string::npos,
               shown + ": an unknown status was not refused as such");
    return 0;
  }
  if (mode == 2 && !text.empty()) {
    FUZZ_CHECK(!r && r.error().message().find("NULL output buffer") != std::string::npos,
               shown + ": a NULL buffer with a size was not refused");
    return 0;
  }
  if (mode == 2) text = {};
  if (mode == 4) {
    FUZZ_CHECK(!r && r.error().message().find("did not allocate") != std::string::npos,
               shown + ": a foreign buffer was not refused");
    return 0;
  }
  if (mode == 3 && !alloc_refused) {
    FUZZ_CHECK(!r && r.error().message().find("bytes of output from a buffer of") != std::string::npos,
               shown + ": a size beyond the buffer was not refused");
    return 0;
  }
  if (status == 0) {
    // JSON as the host takes it: no raw NUL (the parser would stop there),
    // and at most 256 levels deep (plugin_host/call.cpp).
    const bool json = !text.empty() && text.find('\0') == std::string_view::npos &&
                      ratchet::common::json_text_depth(text) <= 256 && nlohmann::json::accept(text);
    if (!json) {
      FUZZ_CHECK(!r, shown + ": ok without JSON output was accepted");
      return 0;
    }
    FUZZ_CHECK(r.has_value(), shown + ": ok with JSON was refused: " + (r ? "" : r.error().message()));
    FUZZ_CHECK(r->status == ph::CallStatus::kOk, shown + ": ok read as another status");
    FUZZ_CHECK(r->output == nlohmann::json::parse(text), shown + ": output differs from the JSON sent");
    FUZZ_CHECK(nlohmann::json::parse(r->output.dump()) == r->output, shown + ": output does not round-trip");
  } else {
    FUZZ_CHECK(r.has_value(),
               shown + ": a status with a message was refused: " + (r ? "" : r.error().message()));
    const ph::CallStatus expected = status == 1   ? ph::CallStatus::kRetryable
                                    : status == 2 ? ph::CallStatus::kThrottled
                                                  : ph::CallStatus::kFatal;
    FUZZ_CHECK(r->status == expected, shown + ": read as another status");
    FUZZ_CHECK(r->message == (text.empty() ? "(the plugin gave no message)" : std::string(text)),
               shown + ": the message differs from the text sent");
  }
  if (size > 2 && data[2] != 255) {
    FUZZ_CHECK(r->retry_after == std::chrono::milliseconds(data[2] * 100), shown + ": retry_after differs");
  } else {
    FUZZ_CHECK(!r->retry_after.has_value(), shown + ": retry_after without one given");
  }
  return 0;
}
