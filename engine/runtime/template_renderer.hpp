// Renders a declarative step's argument template against
// {"args": <job args>, "steps": {"NAME": {"output": <output>}}}.
//
// The engine calls whatever TemplateRenderer it was built with; the
// assembled engine passes config::render_template. render_template_basic is
// a small built-in renderer with the same placeholder syntax, used when no
// other is given: a string that is exactly one "{{path}}" becomes the value
// at that path (any JSON type); placeholders inside longer strings are
// replaced by the value's text. A missing path is an error naming it.
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "ratchet/status.hpp"

namespace ratchet::runtime {

using TemplateRenderer =
    std::function<Result<nlohmann::json>(const nlohmann::json& tmpl, const nlohmann::json& context)>;

Result<nlohmann::json> render_template_basic(const nlohmann::json& tmpl, const nlohmann::json& context);

}  // namespace ratchet::runtime
