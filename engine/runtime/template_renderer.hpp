// How the runtime renders a declarative step's argument template against
// {"args": <job args>, "steps": {"NAME": {"output": <output>}}}. The engine
// uses config::render_template unless it was built with another renderer.
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "ratchet/status.hpp"

namespace ratchet::runtime {

using TemplateRenderer =
    std::function<Result<nlohmann::json>(const nlohmann::json& tmpl, const nlohmann::json& context)>;

}  // namespace ratchet::runtime
