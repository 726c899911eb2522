#include "config/template.hpp"

#include <gtest/gtest.h>

namespace ratchet::config {
namespace {

using nlohmann::json;

json context() {
  return json{{"args", {{"name", "Oppenheimer"}, {"year", 2023}, {"ids", {7, 8}}, {"a", {{"b", true}}}}},
              {"steps", {{"imdb", {{"output", {{"rating", 8.3}, {"votes", {{"count", 812000}}}}}}}}}};
}

TEST(RenderTemplate_WholeStringPlaceholder, KeepsTheValueType) {
  auto out = render_template(json{{"n", "{{args.year}}"},
                                  {"r", "{{steps.imdb.output.rating}}"},
                                  {"b", "{{ args.a.b }}"},
                                  {"ids", "{{args.ids}}"}},
                             context());
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ((*out)["n"], json(2023));
  EXPECT_EQ((*out)["r"], json(8.3));
  EXPECT_EQ((*out)["b"], json(true));
  EXPECT_EQ((*out)["ids"], json({7, 8}));
}

TEST(RenderTemplate_PlaceholderInsideText, SubstitutesText) {
  auto out =
      render_template(json("{{args.name}} ({{args.year}}) ids={{args.ids}} #{{args.ids.1}}"), context());
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ(*out, json("Oppenheimer (2023) ids=[7,8] #8"));
}

TEST(RenderTemplate_NestedStructures, RenderedRecursivelyAndOtherValuesKept) {
  json tmpl = {{"q", {{"title", "{{args.name}}"}, {"tags", {"x", "{{steps.imdb.output.votes.count}}", 3}}}},
               {"flag", false},
               {"none", nullptr},
               {"{{args.name}}", "key is not a template"}};
  auto out = render_template(tmpl, context());
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ((*out)["q"]["title"], json("Oppenheimer"));
  EXPECT_EQ((*out)["q"]["tags"], json({"x", 812000, 3}));
  EXPECT_EQ((*out)["flag"], json(false));
  EXPECT_TRUE((*out)["none"].is_null());
  EXPECT_EQ((*out)["{{args.name}}"], json("key is not a template"));
}

TEST(RenderTemplate_NoPlaceholders, ReturnsTheTemplate) {
  json tmpl = {{"a", "plain {text}"}, {"b", {1, 2}}};
  EXPECT_EQ(render_template(tmpl, context()).value(), tmpl);
}

TEST(RenderTemplate_MissingArgument, ErrorNamesThePlaceholder) {
  auto out = render_template(json{{"x", "title: {{args.title}}"}}, context());
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(out.error().message().find("{{args.title}}"), std::string::npos) << out.error().message();
  EXPECT_NE(out.error().message().find("'title'"), std::string::npos) << out.error().message();
}

TEST(RenderTemplate_MissingNestedKey, ErrorSaysHowFarItResolved) {
  auto out = render_template(json("{{steps.imdb.output.votes.total}}"), context());
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message().find("'steps.imdb.output.votes' has no key 'total'"), std::string::npos)
      << out.error().message();
}

TEST(RenderTemplate_StepWithoutOutput, ErrorNamesTheStep) {
  auto out = render_template(json("{{steps.rt.output.rating}}"), context());
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message().find("{{steps.rt.output.rating}}"), std::string::npos);
  EXPECT_NE(out.error().message().find("step 'rt'"), std::string::npos) << out.error().message();
}

TEST(RenderTemplate_IndexOutOfRangeOrIntoScalar, IsAnError) {
  EXPECT_FALSE(render_template(json("{{args.ids.5}}"), context()).has_value());
  EXPECT_FALSE(render_template(json("{{args.ids.x}}"), context()).has_value());
  EXPECT_FALSE(render_template(json("{{args.name.first}}"), context()).has_value());
}

TEST(RenderTemplate_MalformedPlaceholder, IsAnError) {
  for (const char* bad : {"{{args}}", "{{foo.bar}}", "{{steps.imdb.rating}}", "{{args..x}}", "{{}}",
                          "{{args.name", "{{args.na me}}"}) {
    auto out = render_template(json(bad), context());
    EXPECT_FALSE(out.has_value()) << bad;
  }
}

TEST(Placeholders_Template, ListsEveryExpressionInDocumentOrder) {
  json tmpl = {{"a", "{{args.x}}-{{ steps.s1.output.y }}"}, {"b", {"{{args.x}}", 1, "{{bogus}}"}}};
  EXPECT_EQ(placeholders(tmpl), (std::vector<std::string>{"args.x", "steps.s1.output.y", "args.x", "bogus"}));
  EXPECT_TRUE(placeholders(json{{"a", "none"}, {"b", 3}}).empty());
}

TEST(TemplateErrors_BadSyntax, ReportsEachProblem) {
  auto errors = template_errors(json{{"a", "{{bogus}}"}, {"b", "{{args.x"}, {"c", "{{args.ok}}"}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("never closed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("{{bogus}}"), std::string::npos) << errors[1];
  EXPECT_TRUE(template_errors(json{{"c", "{{args.ok}} {{steps.a.output}}"}}).empty());
}

TEST(ParseTemplateRef_Forms, SplitsRootStepAndPath) {
  auto a = parse_template_ref("args.a.b").value();
  EXPECT_EQ(a.root, TemplateRef::Root::kArgs);
  EXPECT_EQ(a.path, (std::vector<std::string>{"a", "b"}));
  auto s = parse_template_ref(" steps.imdb.output.rating ").value();
  EXPECT_EQ(s.root, TemplateRef::Root::kSteps);
  EXPECT_EQ(s.step, "imdb");
  EXPECT_EQ(s.path, (std::vector<std::string>{"rating"}));
  EXPECT_EQ(s.text, "steps.imdb.output.rating");
  EXPECT_TRUE(parse_template_ref("steps.imdb.output").value().path.empty());
}

}  // namespace
}  // namespace ratchet::config
