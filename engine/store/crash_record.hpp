// The crash record: which job's thread a process was on when it crashed.
//
// A lease that runs out says only that its process stopped renewing it. When
// the process died of a crash signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT), the signal arrived on the thread that faulted, and that thread
// was running one job's step: the recorder's handler appends one line,
// `owner<TAB>signal<TAB>job`, to a file beside the database
// (`<database>-crashes`) before the process dies; only the first crash
// signal of a process is recorded (a sanitizer's report that follows a
// fault ends in abort(), which is not the cause). Whoever later judges the
// expired leases of that owner (store/quarantine.hpp) counts the crash
// against that job alone and clears the jobs that ran beside it.
//
// A process that vanished without a crash signal (SIGKILL, an OOM kill,
// power loss) or stalled past its leases leaves no line; its jobs are judged
// by the quarantine as before.
//
// The handlers are installed once per process, by the first recorder, with
// SA_ONSTACK (each job thread gets an alternate stack, so a stack overflow is
// recorded too), and pass the signal on to the handler that was there before
// (a sanitizer's, the host program's) or to the default action.
//
// Thread-safety: open() and the destructor from any thread; Scope on the
// thread that runs the job. The handler only writes a line with write(2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ratchet::store {

// The record kept for `database`; empty for an in-memory database.
std::filesystem::path crash_record_path(const std::filesystem::path& database);

struct CrashEvidence {
  int signal = 0;
  std::vector<std::int64_t> jobs;  // whose threads crashed; empty: a thread without a job
};

// The last crash `owner` recorded, from the record's final 64 KiB; nullopt
// when it recorded none (or the file cannot be read).
std::optional<CrashEvidence> find_crash(const std::filesystem::path& record, std::string_view owner);

// "SIGSEGV" for 11, "signal 42" for a number without a name here.
std::string signal_name(int signal);

class CrashRecorder {
 public:
  // Registers `owner` to be recorded in `record` (created by the first
  // crash); null when the path or owner is unusable or when 32 recorders are
  // open in the process already (crashes then go unrecorded).
  static std::unique_ptr<CrashRecorder> open(const std::filesystem::path& record, const std::string& owner);
  ~CrashRecorder();
  CrashRecorder(const CrashRecorder&) = delete;
  CrashRecorder& operator=(const CrashRecorder&) = delete;

  // Marks the calling thread as running `job` of `recorder` (which may be
  // null: nothing is marked) until the scope ends; scopes nest.
  class Scope {
   public:
    Scope(const CrashRecorder* recorder, std::int64_t job);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int previous_slot_;
    std::int64_t previous_job_;
  };

 private:
  explicit CrashRecorder(int slot) : slot_(slot) {}
  int slot_;
};

}  // namespace ratchet::store
