// Argument templates of job steps: JSON whose strings may hold placeholders
// {{args.X}}, {{args.a.b}} and {{steps.NAME.output.Y}}, filled in from the
// job's arguments and the outputs of the steps it already ran.
//
// A string that is exactly one placeholder takes the referenced JSON value
// with its type ("{{args.count}}" -> 3); placeholders inside longer strings
// are replaced by text (strings as they are, other values as compact JSON).
// Objects and arrays are rendered recursively; object keys are not templates.
// A path segment that is a number indexes an array ("{{args.ids.0}}").
//
// Pure functions over values; safe to call from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/status.hpp"

namespace ratchet::config {

// A parsed placeholder expression such as "steps.imdb.output.rating".
struct TemplateRef {
  enum class Root { kArgs, kSteps, kSettings };
  Root root = Root::kArgs;
  std::string step;               // the step name when root is kSteps
  std::vector<std::string> path;  // after "args." or after "steps.NAME.output."
  std::string text;               // the expression as written, without braces
};

// Parses the inside of one placeholder. Refuses anything that is not
// args.<key>[.<key>...] or steps.<name>.output[.<key>...].
[[nodiscard]] Result<TemplateRef> parse_template_ref(std::string_view expression);

// Limit keys (`key = "{{args.account}}"` on a limit): text whose
// placeholders name a job argument ({{args.X}}) or a setting of the plugin
// ({{settings.X}}). Refuses anything else.
[[nodiscard]] Result<TemplateRef> parse_key_ref(std::string_view expression);

// Problems of a limit key template, one message each; empty when usable. A
// key holds at least one placeholder (a key without one is one budget, as
// the limit without a key).
std::vector<std::string> key_template_errors(std::string_view tmpl);

// A key template parsed once, rendered per call.
struct KeyTemplate {
  struct Piece {
    std::string literal;  // when ref is empty
    std::optional<TemplateRef> ref;
  };
  std::vector<Piece> pieces;
};
[[nodiscard]] Result<KeyTemplate> parse_key_template(std::string_view tmpl);

// The key a call's limit is kept under: `tmpl` with each placeholder replaced
// by the value it names (strings as they are, other values as compact JSON).
// A missing argument or setting is an invalid_argument error naming it.
[[nodiscard]] Result<std::string> render_key(const KeyTemplate& tmpl, const nlohmann::json& args,
                                             const nlohmann::json& settings);
[[nodiscard]] Result<std::string> render_key(std::string_view tmpl, const nlohmann::json& args,
                                             const nlohmann::json& settings);

// Every placeholder expression in `tmpl` (inside "{{" and "}}", surrounding
// spaces trimmed), in document order, repeats included. Malformed
// expressions are listed too, so a validator can report them with
// parse_template_ref; an unterminated "{{" is not listed (see template_errors).
std::vector<std::string> placeholders(const nlohmann::json& tmpl);

// Syntax problems in `tmpl`, one message each: an unterminated "{{" and
// expressions parse_template_ref refuses. Empty when the template is usable.
std::vector<std::string> template_errors(const nlohmann::json& tmpl);

// Fills in `tmpl` from `context` = {"args": ..., "steps": {"NAME": {"output": ...}}}.
// A reference that is missing from the context is an invalid_argument error
// naming the placeholder and how far its path resolved.
[[nodiscard]] Result<nlohmann::json> render_template(const nlohmann::json& tmpl,
                                                     const nlohmann::json& context);

}  // namespace ratchet::config
