#include "node/flag_values.h"

#include <gtest/gtest.h>

namespace gpuslice::node {
namespace {

using core::LevelWord;
using core::Priority;

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
