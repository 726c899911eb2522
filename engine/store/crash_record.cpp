#include "store/crash_record.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

namespace ratchet::store {
namespace {

constexpr int kSlots = 32;
constexpr std::size_t kOwnerMax = 200;
constexpr std::array kSignals = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t kAltStack = 64 * 1024;

constexpr std::size_t kPathMax = 4096;

// What the handler reads. Filled before `active` is set, cleared by
// unsetting it first. The file is opened only by the handler (open(2) is
// async-signal-safe), so a process that never crashes leaves none.
struct Slot {
  std::atomic<bool> active{false};
  char path[kPathMax] = {};
  char line_head[kOwnerMax + 2] = {};  // "owner\t"
  std::size_t head_len = 0;
};

std::array<Slot, kSlots> g_slots;
std::mutex g_slots_mu;  // serialises open and close, never taken by the handler
std::array<struct sigaction, kSignals.size()> g_previous{};
std::once_flag g_installed;

// initial-exec: reading it from the handler must not allocate.
__attribute__((tls_model("initial-exec"))) thread_local int t_slot = -1;
__attribute__((tls_model("initial-exec"))) thread_local std::int64_t t_job = 0;

// A thread without an alternate stack gets one for as long as it lives, so
// a stack overflow still runs the handler.
struct AltStack {
  std::unique_ptr<char[]> memory;
  AltStack() {
    stack_t current{};
    if (::sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    memory = std::make_unique<char[]>(kAltStack);
    stack_t mine{};
    mine.ss_sp = memory.get();
    mine.ss_size = kAltStack;
    if (::sigaltstack(&mine, nullptr) != 0) memory.reset();
  }
  ~AltStack() {
    if (!memory) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
  }
  AltStack(const AltStack&) = delete;
  AltStack& operator=(const AltStack&) = delete;
};

// Decimal digits of `v` (v >= 0) into `out`; returns the count.
std::size_t put_number(char* out, std::int64_t v) {
  char digits[24];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < sizeof(digits));
  for (std::size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

void write_line(const Slot& slot, int sig, std::int64_t job) {
  char line[kOwnerMax + 64];
  std::size_t n = slot.head_len;
  std::memcpy(line, slot.line_head, n);
  n += put_number(line + n, sig);
  line[n++] = '\t';
  n += put_number(line + n, job < 0 ? 0 : job);
  line[n++] = '\n';
  const int fd = ::open(slot.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  // One write with O_APPEND: lines of several processes do not interleave.
  [[maybe_unused]] ssize_t w = ::write(fd, line, n);
  ::close(fd);
}

void pass_on(int sig, siginfo_t* info, void* context) {
  std::size_t i = 0;
  while (i < kSignals.size() && kSignals[i] != sig) ++i;
  if (i < kSignals.size()) {
    const struct sigaction& before = g_previous[i];
    if ((before.sa_flags & SA_SIGINFO) != 0 && before.sa_sigaction != nullptr) {
      before.sa_sigaction(sig, info, context);
      return;
    }
    if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN && before.sa_handler != nullptr) {
      before.sa_handler(sig);
      return;
    }
  }
  // The default action: raised now, delivered as the handler returns (a
  // fault would repeat anyway; a raised signal would not).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Set by the first crash signal: one that follows while the process dies
// (a sanitizer's report ending in abort()) is not the cause.
std::atomic<bool> g_crashed{false};

void on_crash(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int slot = t_slot;
  if (g_crashed.exchange(true)) {
    // Already recorded.
  } else if (slot >= 0 && slot < kSlots) {
    const Slot& s = g_slots[static_cast<std::size_t>(slot)];
    if (s.active.load(std::memory_order_acquire)) write_line(s, sig, t_job);
  } else {
    // Not on a job's thread: every engine of the process learns it crashed,
    // without a job to blame.
    for (const Slot& s : g_slots) {
      if (s.active.load(std::memory_order_acquire)) write_line(s, sig, 0);
    }
  }
  errno = saved_errno;
  pass_on(sig, info, context);
}

void install_handlers() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction mine {};
    mine.sa_sigaction = on_crash;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    struct sigaction before {};
    if (::sigaction(kSignals[i], nullptr, &before) != 0) continue;
    // A host that ignores the signal keeps ignoring it.
    if ((before.sa_flags & SA_SIGINFO) == 0 && before.sa_handler == SIG_IGN) continue;
    g_previous[i] = before;
    ::sigaction(kSignals[i], &mine, nullptr);
  }
}

}  // namespace

std::filesystem::path crash_record_path(const std::filesystem::path& database) {
  const std::string s = database.string();
  if (s.empty() || s == ":memory:" || s.starts_with("file::memory:")) return {};
  return database.string() + "-crashes";
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal " + std::to_string(signal);
  }
}

std::optional<CrashEvidence> find_crash(const std::filesystem::path& record, std::string_view owner) {
  if (record.empty() || owner.empty()) return std::nullopt;
  std::ifstream in(record, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  constexpr std::streamoff kTail = 64 * 1024;
  in.seekg(size > kTail ? size - kTail : 0);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::optional<CrashEvidence> found;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a line cut short by a dying process
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    const std::size_t tab1 = line.find('\t');
    if (tab1 == std::string_view::npos || line.substr(0, tab1) != owner) continue;
    const std::size_t tab2 = line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos) continue;
    int sig = 0;
    std::int64_t job = 0;
    try {
      sig = std::stoi(std::string(line.substr(tab1 + 1, tab2 - tab1 - 1)));
      job = std::stoll(std::string(line.substr(tab2 + 1)));
    } catch (const std::exception&) {
      continue;
    }
    // Threads that crashed at once: every job they ran is named.
    if (!found || found->signal != sig) found = CrashEvidence{sig, {}};
    if (job > 0) found->jobs.push_back(job);
  }
  return found;
}

std::unique_ptr<CrashRecorder> CrashRecorder::open(const std::filesystem::path& record,
                                                   const std::string& owner) {
  const std::string path = record.string();
  if (path.empty() || path.size() >= kPathMax || owner.empty() || owner.size() > kOwnerMax ||
      owner.find_first_of("\t\n") != std::string::npos)
    return nullptr;
  std::lock_guard lock(g_slots_mu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[static_cast<std::size_t>(i)];
    if (s.active.load(std::memory_order_relaxed)) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    std::memcpy(s.line_head, owner.data(), owner.size());
    s.line_head[owner.size()] = '\t';
    s.head_len = owner.size() + 1;
    s.active.store(true, std::memory_order_release);
    std::call_once(g_installed, install_handlers);
    return std::unique_ptr<CrashRecorder>(new CrashRecorder(i));
  }
  return nullptr;
}

CrashRecorder::~CrashRecorder() {
  std::lock_guard lock(g_slots_mu);
  g_slots[static_cast<std::size_t>(slot_)].active.store(false, std::memory_order_release);
}

CrashRecorder::Scope::Scope(const CrashRecorder* recorder, std::int64_t job)
    : previous_slot_(t_slot), previous_job_(t_job) {
  if (recorder == nullptr) return;
  thread_local AltStack alt_stack;
  t_job = job;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_slot = recorder->slot_;
}

CrashRecorder::Scope::~Scope() {
  t_slot = previous_slot_;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_job = previous_job_;
}

}  // namespace ratchet::store
