// The progress line's list of steps parked now per plugin.
#include <gtest/gtest.h>

#include "progress.hpp"

namespace ratchet::cli {
namespace {

PluginCallStats parked(std::string plugin, std::uint64_t now, std::uint64_t parks_so_far) {
  PluginCallStats p;
  p.plugin = std::move(plugin);
  p.parked_now = now;
  p.parks = parks_so_far;
  return p;
}

TEST(ProgressLine, ParkedSummary_NoStepParkedNow_SaysNone) {
  EXPECT_EQ(parked_summary({}), "none");
  // Parks that ended are history, not what is parked now.
  EXPECT_EQ(parked_summary({parked("imdb", 0, 12)}), "none");
}

TEST(ProgressLine, ParkedSummary_StepsParkedNow_ListsEachPluginByNameWithItsCount) {
  EXPECT_EQ(parked_summary({parked("sify", 1, 4), parked("netflix", 0, 9), parked("imdb", 3, 3)}),
            "imdb 3, sify 1");
}

}  // namespace
}  // namespace ratchet::cli
