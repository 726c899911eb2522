#include "table.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace ratchet::bench {

namespace {

// Left-aligns the first column and right-aligns the others.
void print_grid(std::ostream& out, const std::vector<std::vector<std::string>>& grid) {
  std::vector<std::size_t> width;
  for (const auto& line : grid) {
    width.resize(std::max(width.size(), line.size()), 0);
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  for (const auto& line : grid) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - line[c].size(), ' ');
      text += c == 0 ? line[c] + pad : "  " + pad + line[c];
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  }
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

void print_table(std::ostream& out, const BenchSetup& setup, const std::vector<Row>& rows) {
  out << "oscar: " << setup.jobs << " \"rate a movie\" jobs (5 portal calls each), " << setup.workers
      << " workers per strategy, bound = N / slowest rate = " << fixed(setup.bound_seconds(), 2) << " s\n";
  for (const auto& p : setup.portals) {
    out << "  " << p.name << ": " << p.options.limit << "/" << p.options.window.count() << "ms, "
        << p.dialect;
    if (p.options.burst) out << ", burst " << *p.options.burst;
    out << "\n";
  }
  out << "\n";

  std::vector<std::vector<std::string>> grid{{"strategy", "makespan s", "x bound", "requests", "429s",
                                              "req/rating", "parks/call", "jobs done", "wrong ratings",
                                              "peak RSS MiB"}};
  for (const auto& r : rows) {
    if (!r.available) {
      grid.push_back({r.strategy, "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    grid.push_back({r.strategy, fixed(r.makespan_s, 2), fixed(r.ratio(), 2), std::to_string(r.requests),
                    std::to_string(r.throttled), fixed(r.requests_per_rating(), 2),
                    r.parks >= 0 ? fixed(r.parks_per_call(), 2) : "-",
                    std::to_string(r.jobs_completed) + "/" + std::to_string(r.jobs),
                    std::to_string(r.ratings_wrong) + "/" + std::to_string(r.ratings_checked),
                    fixed(static_cast<double>(r.peak_rss_kib) / 1024.0, 1)});
  }
  print_grid(out, grid);

  out << "\nmost requests the server saw in any one window, sliding (allowed to a client keeping the limit;\n"
      << "a client that only obeys a fixed window can reach twice the limit across a boundary, "
         "unthrottled):\n";
  std::vector<std::vector<std::string>> detail{{"strategy"}};
  for (const auto& p : setup.portals) {
    detail[0].push_back(p.name + " (" + std::to_string(p.allowed_in_window()) + ")");
  }
  for (const auto& r : rows) {
    if (!r.available || r.portals.empty()) continue;
    std::vector<std::string> line{r.strategy};
    for (const auto& p : r.portals) {
      line.push_back(std::to_string(p.max_in_window) + (p.max_in_window > p.allowed ? " !" : ""));
    }
    detail.push_back(std::move(line));
  }
  print_grid(out, detail);

  out << "\n";
  for (const auto& r : rows) {
    std::vector<std::string> notes;
    if (!r.note.empty()) notes.push_back(r.note);
    if (r.available) {
      if (r.errors > 0) notes.push_back(std::to_string(r.errors) + " answers 5xx");
      const auto over = r.over_limit();
      notes.push_back(over.empty() ? "every portal kept within its limit"
                                   : "over the limit: " + join(over, ", "));
      notes.push_back(r.ratings_wrong == 0 ? "all " + std::to_string(r.ratings_checked) + " ratings correct"
                                           : std::to_string(r.ratings_wrong) + " ratings WRONG");
    }
    out << "  " << r.strategy << ": " << join(notes, "; ") << "\n";
  }
  out << "peak RSS of the process: " << fixed(static_cast<double>(peak_rss_kib()) / 1024.0, 1) << " MiB\n";
}

nlohmann::json to_json(const BenchSetup& setup, const std::vector<Row>& rows) {
  nlohmann::json portals = nlohmann::json::array();
  for (const auto& p : setup.portals) {
    nlohmann::json j = {{"name", p.name},
                        {"dialect", p.dialect},
                        {"limit", p.options.limit},
                        {"window_ms", p.options.window.count()},
                        {"allowed_in_window", p.allowed_in_window()}};
    if (p.options.burst) j["burst"] = *p.options.burst;
    portals.push_back(std::move(j));
  }
  nlohmann::json out_rows = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"strategy", r.strategy}, {"available", r.available}, {"note", r.note}};
    if (r.available) {
      nlohmann::json per_portal = nlohmann::json::object();
      for (const auto& p : r.portals) {
        per_portal[p.name] = {{"requests", p.requests},
                              {"throttled", p.throttled},
                              {"errors", p.errors},
                              {"max_in_window", p.max_in_window},
                              {"allowed_in_window", p.allowed}};
      }
      j.update({{"makespan_s", r.makespan_s},
                {"makespan_over_bound", r.ratio()},
                {"requests", r.requests},
                {"throttled", r.throttled},
                {"errors", r.errors},
                {"requests_per_rating", r.requests_per_rating()},
                {"parks", r.parks},
                {"parks_per_call", r.parks >= 0 ? nlohmann::json(r.parks_per_call()) : nlohmann::json()},
                {"jobs", r.jobs},
                {"jobs_completed", r.jobs_completed},
                {"ratings_checked", r.ratings_checked},
                {"ratings_wrong", r.ratings_wrong},
                {"over_limit", r.over_limit()},
                {"peak_rss_kib", r.peak_rss_kib},
                {"portals", per_portal}});
    }
    out_rows.push_back(std::move(j));
  }
  return {{"jobs", setup.jobs}, {"workers", setup.workers}, {"bound_s", setup.bound_seconds()},
          {"portals", portals}, {"rows", out_rows},         {"peak_rss_kib", peak_rss_kib()}};
}

}  // namespace ratchet::bench
