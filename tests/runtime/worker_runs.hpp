// What the worker helper (worker_main.cpp) appended to its RUNS file: how
// often each step ran, and the steps that ran although their checkpoint was
// already committed (violations).
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ratchet::testing {

struct Runs {
  std::map<std::pair<long, std::string>, int> count;
  std::vector<std::string> violations;
  std::set<long> pids;
};

inline Runs read_runs(const std::filesystem::path& p) {
  Runs r;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind, step;
    long job = 0, pid = 0;
    ls >> kind >> job >> step >> pid;
    if (kind == "VIOLATION") r.violations.push_back(line);
    if (kind == "RUN") {
      ++r.count[{job, step}];
      r.pids.insert(pid);
    }
  }
  return r;
}

}  // namespace ratchet::testing
