// Runs a declarative job type (config::JobTypeSpec): each step calls a plugin
// operation with arguments rendered from the job's arguments and earlier
// steps' outputs; a step starts once every step it names in `after` has
// committed, and steps with no dependency between them run concurrently.
//
// Committed steps are replayed from their checkpoints. When a step fails,
// parks or the run is signalled, no further step starts; steps in flight are
// let finish (their outputs commit) before run_dag returns or throws.
//
// Returns the job's result: {"<step>": <output>, ...} for every step.
#pragma once

#include <nlohmann/json.hpp>

#include "config/spec.hpp"
#include "runtime/job_run.hpp"
#include "runtime/template_renderer.hpp"

namespace ratchet::runtime {

nlohmann::json run_dag(JobRun& run, const config::JobTypeSpec& spec, const TemplateRenderer& render);

}  // namespace ratchet::runtime
