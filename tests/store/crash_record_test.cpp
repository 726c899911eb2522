// The crash record: a process that dies of a crash signal on a job's thread
// leaves one line naming that job, which find_crash reads back. The crashes
// happen in forked children, so the test process lives on.
#include "store/crash_record.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "temp_dir.hpp"

namespace ratchet::store {
namespace {

// Runs `crash` in a child that opened a recorder as `owner`; returns the
// child's wait status.
template <typename F>
int in_child(const std::filesystem::path& record, const std::string& owner, F crash) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto recorder = CrashRecorder::open(record, owner);
    if (!recorder) ::_exit(90);
    crash(recorder.get());
    ::_exit(91);  // the crash did not happen
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(CrashRecord, AbortOnAJobsThread_NamesThatJobAndTheProcessStillDiesOfTheSignal) {
  testing::TempDir dir;
  const auto record = crash_record_path(dir.file("jobs.db"));
  const int status = in_child(record, "host:1:a", [](const CrashRecorder* r) {
    CrashRecorder::Scope running(r, 42);
    std::abort();
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGABRT) << "the signal goes on to the default action";
  auto crash = find_crash(record, "host:1:a");
  ASSERT_TRUE(crash);
  EXPECT_EQ(crash->signal, SIGABRT);
  EXPECT_EQ(crash->jobs, std::vector<std::int64_t>{42});
  EXPECT_FALSE(find_crash(record, "host:1:b")) << "another owner crashed nowhere";
}

TEST(CrashRecord, SegfaultOnAStepThread_NamesTheJobOfThatThreadNotOthers) {
  testing::TempDir dir;
  const auto record = crash_record_path(dir.file("jobs.db"));
  const int status = in_child(record, "w", [](const CrashRecorder* r) {
    CrashRecorder::Scope other(r, 7);  // this thread runs job 7 and survives
    std::thread step([r] {
      CrashRecorder::Scope running(r, 8);
      // A page that may not be touched: a real fault, which a sanitizer's
      // null-pointer check cannot turn into an exit first.
      void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      *static_cast<volatile int*>(page) = 1;
    });
    step.join();
  });
  // Under a sanitizer its own handler (called after the record) reports and
  // exits; without one the process dies of SIGSEGV.
  EXPECT_TRUE(WIFSIGNALED(status) ||
              (WIFEXITED(status) && WEXITSTATUS(status) != 91 && WEXITSTATUS(status) != 0))
      << status;
  auto crash = find_crash(record, "w");
  ASSERT_TRUE(crash);
  EXPECT_EQ(crash->signal, SIGSEGV);
  EXPECT_EQ(crash->jobs, std::vector<std::int64_t>{8});
}

TEST(CrashRecord, CrashOffEveryJobThread_IsRecordedWithoutAJob) {
  testing::TempDir dir;
  const auto record = crash_record_path(dir.file("jobs.db"));
  const int status = in_child(record, "w", [](const CrashRecorder*) { std::abort(); });
  ASSERT_TRUE(WIFSIGNALED(status));
  auto crash = find_crash(record, "w");
  ASSERT_TRUE(crash);
  EXPECT_TRUE(crash->jobs.empty());
}

TEST(CrashRecord, ProcessThatDoesNotCrash_LeavesNoFile) {
  testing::TempDir dir;
  const auto record = crash_record_path(dir.file("jobs.db"));
  {
    auto recorder = CrashRecorder::open(record, "w");
    ASSERT_TRUE(recorder);
    CrashRecorder::Scope running(recorder.get(), 1);
  }
  EXPECT_FALSE(std::filesystem::exists(record));
}

TEST(CrashRecord, FindCrash_SkipsOtherOwnersCutLinesAndGarbage) {
  testing::TempDir dir;
  const auto record = crash_record_path(dir.file("jobs.db"));
  {
    std::ofstream out(record);
    out << "a\t11\t5\n"
        << "b\t6\t9\n"
        << "a\tx\t5\n"     // garbage: skipped
        << "ab\t11\t77\n"  // another owner sharing a prefix
        << "a\t6\t3\n"     // the last crash of a wins
        << "a\t11\t12";    // cut short by a dying process
  }
  auto a = find_crash(record, "a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->signal, 6);
  EXPECT_EQ(a->jobs, std::vector<std::int64_t>{3});
  EXPECT_FALSE(find_crash(record, "c"));
  EXPECT_FALSE(find_crash(dir.file("missing-crashes"), "a"));
  EXPECT_TRUE(crash_record_path(":memory:").empty());
}

}  // namespace
}  // namespace ratchet::store
