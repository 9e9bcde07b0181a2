#include "task/task_levels.h"

#include <gtest/gtest.h>

#include "core/vgpu_layout.h"

namespace gpuslice::task {
namespace {

using core::LevelWord;
using core::Priority;

std::vector<std::string> Names(const LevelTable& table) {
  std::vector<std::string> names;
  for (const Level& level : table.levels()) names.push_back(level.name);
  return names;
}

TEST(TaskLevelsTest, DefaultsAreOrderedHighestFirstWithTheBuiltInsAtRankZero) {
  const LevelTable table = LevelTable::Defaults();
  EXPECT_EQ(Names(table), (std::vector<std::string>{"critical", "high", "lc", "normal", "low", "be"}));
  EXPECT_EQ(table.levels()[0].word, LevelWord(Priority::kLatencyCritical, 1));
  EXPECT_EQ(table.levels()[1].word, LevelWord(Priority::kLatencyCritical, 0));
  EXPECT_EQ(table.levels()[2].word, 1u);  // `lc`, as the board has always known it
  EXPECT_EQ(table.levels()[5].word, 0u);  // `be`
  EXPECT_TRUE(table.levels()[1].latency_critical);
  EXPECT_FALSE(table.levels()[3].latency_critical);
}

TEST(TaskLevelsTest, ParsesLevelsWithSlosAndIgnoresOtherSections) {
  StatusOr<LevelTable> table = LevelTable::Parse(R"(
log_level: info
levels:
  - {name: critical, class: lc, slo_ms: 5}
  - {name: high, class: lc, slo_ms: 12.5}
  - {name: mid, class: lc}
  - {name: normal, class: be}
  - {name: low, class: be}
)",
                                                 "t.yaml");
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(Names(*table), (std::vector<std::string>{"critical", "high", "mid", "lc", "normal", "low", "be"}));
  EXPECT_EQ(table->levels()[0].word, LevelWord(Priority::kLatencyCritical, 2));
  EXPECT_EQ(table->levels()[0].slo_ns, 5'000'000u);
  EXPECT_EQ(table->levels()[1].slo_ns, 12'500'000u);
  EXPECT_EQ(table->levels()[2].slo_ns, 0u);
  EXPECT_EQ(table->Find("normal"), 4u);
  EXPECT_EQ(table->Find("nope"), std::nullopt);
}

struct BadConfig {
  const char* yaml;
  const char* message;  // a part of the error
};

class TaskLevelsBadConfigTest : public testing::TestWithParam<BadConfig> {};

TEST_P(TaskLevelsBadConfigTest, NamesTheProblem) {
  StatusOr<LevelTable> table = LevelTable::Parse(GetParam().yaml, "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("t.yaml"), std::string::npos) << table.status().message();
  EXPECT_NE(table.status().message().find(GetParam().message), std::string::npos) << table.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Errors, TaskLevelsBadConfigTest,
    testing::Values(BadConfig{"log_level: info\n", "no `levels:` list"}, BadConfig{"levels: [", "not YAML"},
                    BadConfig{"levels: []\n", "non-empty list"},
                    BadConfig{"levels:\n  - {name: a, class: lc, prio: 3}\n", "unknown key `prio`"},
                    BadConfig{"levels:\n  - {name: a, class: gold}\n", "class `gold`"},
                    BadConfig{"levels:\n  - {name: a}\n", "has no `class: lc`"},
                    BadConfig{"levels:\n  - {name: Big, class: lc}\n", "name `Big`"},
                    BadConfig{"levels:\n  - {name: lc, class: lc}\n", "built-in level"},
                    BadConfig{"levels:\n  - {name: a, class: lc}\n  - {name: a, class: lc}\n", "listed twice"},
                    BadConfig{"levels:\n  - {name: a, class: be, slo_ms: 3}\n", "only `class: lc` levels"},
                    BadConfig{"levels:\n  - {name: a, class: lc, slo_ms: -1}\n", "slo_ms `-1`"},
                    BadConfig{"levels:\n  - {name: a, class: lc, slo_ms: fast}\n", "slo_ms `fast`"},
                    BadConfig{"levels:\n  - {name: a, class: be}\n  - {name: b, class: lc}\n", "list every `class: lc` level first"}));

TEST(TaskLevelsTest, AMissingFileSaysWhatToGive) {
  StatusOr<LevelTable> table = LevelTable::Load("/nonexistent/gpuslice.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("cannot be read"), std::string::npos);
}

TEST(TaskLevelsTest, NameOfPrefersTheConfiguredNameAndSpellsUnknownWords) {
  const LevelTable table = LevelTable::Defaults();
  EXPECT_EQ(table.NameOf(core::LevelWord(core::Priority::kLatencyCritical, 1)), "critical");
  EXPECT_EQ(table.NameOf(core::LevelWord(core::Priority::kLatencyCritical, 0)), "high");  // not "lc"
  EXPECT_EQ(table.NameOf(core::LevelWord(core::Priority::kBestEffort, 0)), "low");
  EXPECT_EQ(table.NameOf(core::LevelWord(core::Priority::kBestEffort, 7)), "be+7");
}

}  // namespace
}  // namespace gpuslice::task
