// The demo's core at a small size: 20 jobs, the worker killed halfway, a new
// one resumes; every job completes and the summary is printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "command_runner.hpp"

namespace ratchet::cli_test {
namespace {

using ::testing::HasSubstr;

TEST(RatchetDemoTest, SmallRun_KilledHalfway_EveryJobCompletesAndTheSummaryIsPrinted) {
  auto dir = std::filesystem::temp_directory_path() / ("ratchet-demo-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto o = run_command({tool_path("ratchet-demo"), "--jobs", "20", "--dir", dir.string()});
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("killed the worker"));
  EXPECT_THAT(o.out, HasSubstr("jobs completed: 20/20"));
  EXPECT_THAT(o.out, HasSubstr("makespan"));
  EXPECT_THAT(o.out, HasSubstr("timeline"));
  EXPECT_THAT(o.out, HasSubstr("jobs list -c"));
  EXPECT_TRUE(std::filesystem::exists(dir / "oscar.db"))
      << "the demo leaves its database for the next commands";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ratchet::cli_test
