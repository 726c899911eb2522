// Reads the sample lines of a Prometheus text scrape, for the tests of
// `ratchet run --metrics`. Label values must hold no comma or escaped quote.
// Pure functions.
#pragma once

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ratchet::cli_test {

// One sample line: name{labels} value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The sample lines of a scrape; comments and blank lines are skipped.
inline std::vector<Sample> parse_samples(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    const auto brace = line.find('{');
    const auto space = line.rfind(' ');
    s.name = line.substr(0, std::min(brace, space));
    if (brace != std::string::npos) {
      std::istringstream pairs(line.substr(brace + 1, line.find('}') - brace - 1));
      std::string pair;
      while (std::getline(pairs, pair, ',')) {
        const auto eq = pair.find('=');
        // name="value"
        s.labels[pair.substr(0, eq)] = pair.substr(eq + 2, pair.size() - eq - 3);
      }
    }
    s.value = std::stod(line.substr(space + 1));
    out.push_back(std::move(s));
  }
  return out;
}

// The value of the sample named `name` with exactly `labels`; -1 when absent.
inline double value_of(const std::vector<Sample>& samples, const std::string& name,
                       const std::map<std::string, std::string>& labels) {
  for (const auto& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return -1;
}

// The bucket values of one histogram series in the order they were written.
inline std::vector<Sample> buckets_of(const std::vector<Sample>& samples, const std::string& histogram,
                                      const std::map<std::string, std::string>& labels) {
  std::vector<Sample> out;
  for (const auto& s : samples) {
    if (s.name != histogram + "_bucket") continue;
    auto without_le = s.labels;
    without_le.erase("le");
    if (without_le == labels) out.push_back(s);
  }
  return out;
}

}  // namespace ratchet::cli_test
