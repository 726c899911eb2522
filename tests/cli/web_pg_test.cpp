// `ratchet web` on PostgreSQL: the tests that read what another process
// does, on a fresh schema of the `postgres` fixture's cluster.
#include "fresh_schema.hpp"
#include "web_fixture.hpp"

namespace ratchet::cli_test {
namespace {

using namespace web_fixture;

class RatchetWebPgTest : public RatchetWebTest {
 protected:
  std::string database() override { return testing::fresh_postgres_schema(); }
};

TEST_F(RatchetWebPgTest, Api_AgainstADatabaseAnotherProcessWorks_ShowsFiltersPagesAndActs) {
  api_against_a_database_another_process_works();
}

TEST_F(RatchetWebPgTest, WhatOnlyTheRunningEngineKnows_IsShownFromItsReport) {
  reports_of_the_running_engine();
}

}  // namespace
}  // namespace ratchet::cli_test
