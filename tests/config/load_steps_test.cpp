// Job types: steps, their dependencies and the placeholders they read.
#include <gtest/gtest.h>

#include "load_helpers.hpp"

namespace ratchet::config {
namespace {

using testing::errors;
using testing::load;

TEST(LoadSteps_DuplicateName, PointsAtTheSecondAndCitesTheFirst) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x" },
  { name = "a", call = "p.y" },
]
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:4:12: job.j.steps[1].name: ", "duplicate step name \"a\" (first declared at line 3)");
}

TEST(LoadSteps_AfterUnknownStep, SuggestsTheNearestStep) {
  auto r = load(R"([job.j]
steps = [
  { name = "fetch", call = "p.x" },
  { name = "b", call = "p.y", after = ["fetsh"] },
]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:40: job.j.steps[1].after[0]: ",
                    "no step named \"fetsh\" in this job (did you mean \"fetch\"?)");
}

TEST(LoadSteps_WaitsForItself, IsRefused) {
  auto r = load("[job.j]\nsteps = [{ name = \"a\", call = \"p.x\", after = [\"a\"] }]\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:47: job.j.steps[0].after[0]: ", "cannot wait for itself");
}

TEST(LoadSteps_Cycle, IsReportedOnceWithItsPath) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x", after = ["c"] },
  { name = "b", call = "p.x", after = ["a"] },
  { name = "c", call = "p.x", after = ["b"] },
  { name = "d", call = "p.x", after = ["c"] },
]
)");
  auto e = errors(r);
  ASSERT_EQ(e.size(), 1u) << testing::joined(e);
  EXPECT_EQ(
      e[0],
      "t.toml:4:40: job.j.steps[1].after[0]: steps wait for each other in a cycle: a -> c -> b -> a (each "
      "waits for the next); remove one `after`");
}

TEST(LoadSteps_CallWithoutOperation, IsRefused) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "imdb" },
  { name = "b", call = "imdb.get.rating" },
  { name = "c", call = ".x" },
]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:24: job.j.steps[0].call: ", "\"imdb\" is not of the form plugin.operation");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:24: job.j.steps[1].call: ", "not of the form plugin.operation");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:24: job.j.steps[2].call: ", "not of the form plugin.operation");
}

TEST(LoadSteps_PlaceholderOfUnknownStep, IsRefusedWithSuggestion) {
  auto r = load(R"([job.j]
steps = [
  { name = "imdb", call = "p.x" },
  { name = "b", call = "p.y", after = ["imdb"], args = { r = "{{steps.imbd.output.rating}}" } },
]
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:4:62: job.j.steps[1].args.r: ",
      "placeholder {{steps.imbd.output.rating}} reads step \"imbd\", which this job does not have "
      "(did you mean \"imdb\"?)");
}

TEST(LoadSteps_PlaceholderOfStepNotWaitedFor, IsRefused) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x" },
  { name = "b", call = "p.y", args = { v = "x={{steps.a.output.v}}" } },
]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:44: job.j.steps[1].args.v: ",
                    "reads step \"a\", which step \"b\" does not wait for; add \"a\" to its `after`");
}

TEST(LoadSteps_PlaceholderOfTransitiveDependency, IsAccepted) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x" },
  { name = "b", call = "p.y", after = ["a"] },
  { name = "c", call = "p.z", after = ["b"], args = { v = ["{{steps.a.output.v}}", { w = "{{steps.b.output}}" }] } },
]
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& c = (*r)->jobs.at("j").steps[2];
  EXPECT_EQ(c.plugin, "p");
  EXPECT_EQ(c.operation, "z");
  EXPECT_EQ(c.after, std::vector<std::string>{"b"});
  EXPECT_EQ(c.args["v"][0], "{{steps.a.output.v}}");
}

TEST(LoadSteps_PlaceholderOfOwnStepOrMalformed, IsRefused) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x", args = { v = "{{steps.a.output.v}}", w = "{{arg.x}}", u = "{{args.x" } },
]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:44: job.j.steps[0].args.v: ", "reads the output of its own step");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:72: job.j.steps[0].args.w: ", "must start with 'args.' or 'steps.'");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:89: job.j.steps[0].args.u: ", "never closed");
}

TEST(LoadSteps_ArgsNotDeclared, AreInferredFromPlaceholders) {
  auto r = load(R"([job.j]
steps = [
  { name = "a", call = "p.x", args = { t = "{{args.title}}", y = "{{args.year}} {{args.title}}" } },
  { name = "b", call = "p.x", args = { o = "{{args.opts.deep}}" } },
]
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& args = (*r)->jobs.at("j").args;
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].name, "opts");
  EXPECT_EQ(args[1].name, "title");
  EXPECT_EQ(args[2].name, "year");
  for (const auto& a : args) {
    EXPECT_EQ(a.type, ArgType::kAny);
    EXPECT_TRUE(a.required);
  }
}

TEST(LoadSteps_ArgsDeclared, AreReadAndPlaceholdersChecked) {
  auto r = load(R"([job.j]
args = { title = "string", year = "integer?", tags = { type = "array", required = false }, x = "nmber" }
steps = [{ name = "a", call = "p.x", args = { t = "{{args.titel}}" } }]
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:2:96: job.j.args.x: ", "\"nmber\" is not an argument type (did you mean \"number\"?)");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:51: job.j.steps[0].args.t: ",
                    "reads argument \"titel\", which this job does not declare (did you mean \"title\"?)");

  auto ok = load(R"([job.j]
args = { title = "string", year = "integer?", tags = { type = "array", required = false } }
steps = [{ name = "a", call = "p.x", args = { t = "{{args.title}}" } }]
)");
  ASSERT_TRUE(ok.has_value()) << testing::joined(errors(ok));
  const auto& args = (*ok)->jobs.at("j").args;
  // Declarations are listed by name.
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].name, "tags");
  EXPECT_EQ(args[0].type, ArgType::kArray);
  EXPECT_FALSE(args[0].required);
  EXPECT_EQ(args[1].name, "title");
  EXPECT_EQ(args[1].type, ArgType::kString);
  EXPECT_TRUE(args[1].required);
  EXPECT_EQ(args[2].name, "year");
  EXPECT_EQ(args[2].type, ArgType::kInteger);
  EXPECT_FALSE(args[2].required);
}

TEST(LoadSteps_NoSteps, IsRefused) {
  auto r = load("[job.j]\nsteps = []\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: job.j.steps: ", "at least one step");
}

TEST(LoadSteps_ArrayOfTablesSyntax, ReadsLikeInlineSteps) {
  auto r = load(R"([job.j]
[[job.j.steps]]
name = "a"
call = "p.x"
max_wait = "5m"
[[job.j.steps]]
name = "b"
call = "p.y"
after = ["a"]
args = { id = "{{steps.a.output.id}}" }
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& steps = (*r)->jobs.at("j").steps;
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].max_wait, std::chrono::minutes(5));
  EXPECT_EQ(steps[1].source.to_string(), "t.toml:6:1: job.j.steps[1]");
}

}  // namespace
}  // namespace ratchet::config
