#include "config/spec.hpp"

namespace ratchet::config {

std::string SourceRef::to_string() const {
  std::string out = file.empty() ? std::string("<config>") : file;
  if (line > 0) {
    out += ':' + std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  if (!key_path.empty()) {
    out += ": ";
    out += key_path;
  }
  return out;
}

const CallPolicy& Config::policy_for(const std::string& plugin, const std::string& operation) const {
  // Callers ask only for plugins the config declares (the plugin host checks
  // that once at load time); an unknown plugin gets the defaults rather than
  // undefined behaviour.
  static const CallPolicy kDefaults;
  auto p = plugins.find(plugin);
  if (p == plugins.end()) return kDefaults;
  auto op = p->second.operations.find(operation);
  return op == p->second.operations.end() ? p->second.policy : op->second;
}

}  // namespace ratchet::config
