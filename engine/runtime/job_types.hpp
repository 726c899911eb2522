// The job types an engine knows: declarative ones from config and C++
// handlers defined by the host. An engine claims only jobs of these types.
//
// Thread-safety: define() and find() may be called from any thread; a found
// JobType is immutable and stays valid while held.
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "config/spec.hpp"
#include "ratchet/step_context.hpp"

namespace ratchet::runtime {

struct JobType {
  config::JobTypeSpec spec;
  JobHandler handler;  // empty: declarative, runs spec.steps
};

class JobTypes {
 public:
  void define(std::shared_ptr<const JobType> type) {
    std::unique_lock lock(mu_);
    types_[type->spec.name] = std::move(type);
  }
  std::shared_ptr<const JobType> find(const std::string& name) const {
    std::shared_lock lock(mu_);
    auto it = types_.find(name);
    return it == types_.end() ? nullptr : it->second;
  }
  std::vector<std::string> names() const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, type] : types_) out.push_back(name);
    return out;
  }

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<const JobType>> types_;
};

}  // namespace ratchet::runtime
