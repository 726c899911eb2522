#include "portal_call.hpp"

#include "ratchet/clock.hpp"

namespace ratchet::bench {

std::optional<double> read_rating(std::string_view portal, const nlohmann::json& body) {
  const char* pointer = "/rating";
  if (portal == "rotten_tomatoes") pointer = "/scores/rating";
  if (portal == "sify") pointer = "/result/rating";
  if (portal == "netflix") pointer = "/items/0/rating";
  if (portal == "amazon_prime") pointer = "/product/rating";
  const nlohmann::json::json_pointer ptr(pointer);
  if (!body.contains(ptr) || !body.at(ptr).is_number()) return std::nullopt;
  return body.at(ptr).get<double>();
}

CallResult call_portal(http::Client& client, const PortalSetup& portal, std::string_view movie,
                       std::stop_token stop) {
  CallResult result;
  http::Request request;
  request.url = portal.url + "/movies/" + std::string(movie);
  request.headers = {{"Accept", "application/json"}};
  auto response = client.perform(request, std::move(stop));
  if (!response) {
    result.error = std::string(http::to_string(response.error().kind)) + ": " + response.error().message;
    return result;
  }
  result.status = response->status;
  result.headers = std::move(response->headers);
  if (result.status != 200) return result;
  const auto body = nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    result.error = "the body of " + request.url + " is not JSON";
    return result;
  }
  result.rating = read_rating(portal.name, body);
  if (!result.rating) result.error = "no rating in the body of " + request.url;
  return result;
}

Result<std::unique_ptr<http::Client>> make_client(const BenchSetup& setup) {
  http::ClientOptions options;
  options.timeout = std::chrono::seconds(10);
  options.max_idle_connections = static_cast<std::size_t>(std::max(1, setup.workers));
  options.user_agent = "ratchet-bench-oscar";
  return http::Client::create(std::move(options));
}

StrategyStart start_strategy(const BenchSetup& setup) {
  StrategyStart start;
  auto client = make_client(setup);
  if (!client) {
    start.result.available = false;
    start.result.note = client.error().message();
    return start;
  }
  start.client = std::move(*client);
  start.result.jobs.resize(setup.movies.size());
  return start;
}

bool sleep_until(std::chrono::system_clock::time_point until, std::stop_token stop) {
  return SystemClock().wait_until(until, std::move(stop));
}

}  // namespace ratchet::bench
