#include "demo_config.hpp"

#include <fmt/format.h>

namespace ratchet::demo {

Result<std::string> demo_config(std::string_view oscar, std::string_view base_url,
                                std::string_view plugin_dir) {
  std::string out(oscar);
  constexpr std::string_view kOriginal = "http://127.0.0.1:8080";
  int replaced = 0;
  for (auto pos = out.find(kOriginal); pos != std::string::npos; pos = out.find(kOriginal, pos)) {
    out.replace(pos, kOriginal.size(), base_url);
    pos += base_url.size();
    ++replaced;
  }
  auto plugins = out.find("\nplugins");
  auto engine = out.find("[engine]\n");
  if (replaced == 0 || plugins == std::string::npos || engine == std::string::npos) {
    return fail(
        Error::config("config/oscar.toml lacks [engine], its plugins line or the base URLs "
                      "http://127.0.0.1:8080/...; the demo rewrites those"));
  }
  auto eol = out.find('\n', plugins + 1);
  out.replace(plugins + 1, eol - plugins - 1, fmt::format("plugins  = \"{}\"", plugin_dir));
  out.insert(engine + 9,
             "# demo: a killed worker's jobs are taken over within seconds\n"
             "lease         = \"3s\"\nheartbeat     = \"1s\"\npoll_interval = \"50ms\"\n");
  return out;
}

}  // namespace ratchet::demo
