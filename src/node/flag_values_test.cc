#include "node/flag_values.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpuslice::node {
namespace {

using core::LevelWord;
using core::Priority;

TEST(FlagValuesTest, PowerCapsAreWattsAndBadOnesNameTheFix) {
  EXPECT_EQ(ParsePowerFlag("--power-cap", "150", false).value(), 150.0);
  EXPECT_EQ(ParsePowerFlag("--power-cap", "87.5W", false).value(), 87.5);
  EXPECT_EQ(ParsePowerFlag("--power-cap", "none", true).value(), 0.0);  // `set`: remove it
  EXPECT_EQ(ParsePowerFlag("--power-cap", "0", true).value(), 0.0);
  const std::map<std::string, std::string> bad = {
      {"none", "'none' is not a number of watts; write e.g. --power-cap 150"},
      {"0", "a power cap must be a positive number of watts"},
      {"-20", "a power cap must be a positive number of watts"},
      {"150000", "watts, not milliwatts"},
      {"nan", "a power cap must be a positive number of watts"},
      {"", "is not a number of watts"},
      {"15O", "'15O' is not a number of watts"},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParsePowerFlag("--power-cap", text, /*allow_none=*/false);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("--power-cap: ", 0), 0u) << r.status().message();
  }
}

TEST(FlagValuesTest, ALevelNameIsItsWordInTheNodesLevels) {
  const task::LevelTable levels = task::LevelTable::Defaults();
  EXPECT_EQ(ParseLevelFlag("--priority", "critical", levels).value(), LevelWord(Priority::kLatencyCritical, 1));
  EXPECT_EQ(ParseLevelFlag("--priority", "high", levels).value(), LevelWord(Priority::kLatencyCritical, 0));
  EXPECT_EQ(ParseLevelFlag("--priority", "normal", levels).value(), LevelWord(Priority::kBestEffort, 1));
  // The built-in names and their long spellings stay what they always were.
  EXPECT_EQ(ParseLevelFlag("--priority", "lc", levels).value(), 1u);
  EXPECT_EQ(ParseLevelFlag("--priority", "latency_critical", levels).value(), 1u);
  EXPECT_EQ(ParseLevelFlag("--priority", "be", levels).value(), 0u);
  EXPECT_EQ(ParseLevelFlag("--priority", "best_effort", levels).value(), 0u);
}

TEST(FlagValuesTest, AnUnknownLevelNamesTheFlagAndEveryLevel) {
  auto levels = task::LevelTable::Parse("levels:\n  - {name: gold, class: lc}\n", "test");
  ASSERT_TRUE(levels.ok());
  auto bad = ParseLevelFlag("--priority", "critical", levels.value());  // a default level, not this node's
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--priority: 'critical' is not a priority level; write --priority and one of: gold, lc, be (lc: "
            "latency-critical, be: best-effort; the node's levels come from the daemon config's `levels:`, "
            "docs/configuration.md)");
  EXPECT_FALSE(ParseLevelFlag("--priority", "", levels.value()).ok());
}

}  // namespace
}  // namespace gpuslice::node
