// A pod's or claim's priority level, as tables of request -> result: the
// name a pod gives (gpuslice.io/priority) resolved against a node's levels
// into the vGPU's level word, an unknown name refused with the node's
// levels listed, and the level kept across an assignment record.
#include "k8s/priority_level.h"

#include <gtest/gtest.h>

#include "core/vgpu_layout.h"
#include "k8s/assignment.h"
#include "k8s/names.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using core::LevelWord;
using core::Priority;
using nlohmann::json;
using testing::MakePod;

constexpr Priority kLc = Priority::kLatencyCritical;
constexpr Priority kBe = Priority::kBestEffort;

task::LevelTable Custom() {
  auto t = task::LevelTable::Parse(
      "levels:\n  - {name: gold, class: lc, slo_ms: 5}\n  - {name: silver, class: lc}\n  - {name: bronze, class: be}\n",
      "test");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.value();
}

PodRequest Pod(const json& annotations) {
  auto pod = ParsePodRequest(MakePod("ml", "infer", "uid", {{"main", 50, 8}}, annotations));
  EXPECT_TRUE(pod.ok()) << pod.status().message();
  return pod.ok() ? pod.value() : PodRequest{};
}

TEST(PriorityLevel, PodAnnotationResolvesAgainstTheNodesLevels) {
  const task::LevelTable defaults = task::LevelTable::Defaults();
  const task::LevelTable custom = Custom();
  struct Case {
    const char* annotation;  // nullptr: none
    const task::LevelTable* levels;
    const char* name;  // the level the node resolves
    uint32_t word;
  } cases[] = {
      {nullptr, &defaults, "be", LevelWord(kBe, 0)},    {"lc", &defaults, "lc", LevelWord(kLc, 0)},
      {"be", &defaults, "be", LevelWord(kBe, 0)},       {"critical", &defaults, "critical", LevelWord(kLc, 1)},
      {"high", &defaults, "high", LevelWord(kLc, 0)},   {"normal", &defaults, "normal", LevelWord(kBe, 1)},
      {"low", &defaults, "low", LevelWord(kBe, 0)},     {"gold", &custom, "gold", LevelWord(kLc, 1)},
      {"silver", &custom, "silver", LevelWord(kLc, 0)}, {"bronze", &custom, "bronze", LevelWord(kBe, 0)},
      {"lc", &custom, "lc", LevelWord(kLc, 0)},
  };
  for (const Case& c : cases) {
    const PodRequest pod = Pod(c.annotation ? json{{kPriorityAnnotation, c.annotation}} : json::object());
    auto level = ResolvePodLevel(pod, *c.levels, "node-a");
    ASSERT_TRUE(level.ok()) << (c.annotation ? c.annotation : "(none)") << ": " << level.status().message();
    EXPECT_EQ(level->name, c.name);
    EXPECT_EQ(level->word, c.word) << c.name;
  }
}

TEST(PriorityLevel, AnUnknownLevelIsRefusedNamingTheNodesLevels) {
  struct Case {
    const char* annotation;
    task::LevelTable levels;
    const char* known;  // the list the error must give
  } cases[] = {
      {"urgent", task::LevelTable::Defaults(), "critical, high, lc, normal, low, be"},
      {"high", Custom(), "gold, silver, lc, bronze, be"},  // a default level this node does not have
  };
  for (const Case& c : cases) {
    auto level = ResolvePodLevel(Pod({{kPriorityAnnotation, c.annotation}}), c.levels, "node-a");
    ASSERT_FALSE(level.ok()) << c.annotation;
    const std::string& m = level.status().message();
    for (const std::string& needle :
         {std::string("pod ml/infer"), std::string(kPriorityAnnotation), "\"" + std::string(c.annotation) + "\"",
          std::string("node node-a"), std::string(c.known), std::string("levels:")}) {
      EXPECT_NE(m.find(needle), std::string::npos) << "missing " << needle << " in: " << m;
    }
  }
}

TEST(PriorityLevel, AnSloNeedsALatencyCriticalLevelOnTheNode) {
  const json slo = {{kLcSloP99Annotation, "800"}, {kLcAloneP99Annotation, "300"}};
  json lc = slo, be_level = slo;
  lc[kPriorityAnnotation] = "critical";
  be_level[kPriorityAnnotation] = "normal";  // a best-effort level: only the node knows
  EXPECT_TRUE(ResolvePodLevel(Pod(lc), task::LevelTable::Defaults(), "node-a").ok());
  auto refused = ResolvePodLevel(Pod(be_level), task::LevelTable::Defaults(), "node-a");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("level \"normal\" of node node-a is best-effort"), std::string::npos)
      << refused.status().message();
}

TEST(PriorityLevel, NamesAreCheckedBeforeTheNodeIsKnown) {
  EXPECT_TRUE(CheckLevelName("", "x").ok());
  EXPECT_TRUE(CheckLevelName("gold-2_b", "x").ok());
  for (const std::string& bad : std::vector<std::string>{"Gold", "a b", "a\nb", std::string(33, 'a')}) {
    const Status s = CheckLevelName(bad, "field.priority");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    EXPECT_EQ(s.message().rfind("field.priority is \"", 0), 0u) << s.message();
  }
}

TEST(PriorityLevel, AssignmentsKeepTheLevelAndReadOlderRecords) {
  Assignment a;
  a.vgpu = "k8s-uid-0";
  a.pod_uid = "uid";
  a.namespace_name = "ml";
  a.pod = "infer";
  a.container = "main";
  a.gpus = {0};
  a.uuids = {"GPU-face0000-0000-0000-0000-000000000000"};
  a.level = LevelWord(kLc, 1);
  a.level_name = "critical";
  auto back = ParseAssignment(AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->level, LevelWord(kLc, 1));
  EXPECT_EQ(back->level_name, "critical");
  // A record written before named levels: the class alone.
  json old = json::parse(AssignmentToJson(a));
  old.erase("priority_rank");
  old.erase("priority_level");
  old["priority"] = "lc";
  back = ParseAssignment(old.dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->level, LevelWord(kLc, 0));
  EXPECT_EQ(back->level_name, "lc");
}

}  // namespace
}  // namespace gpuslice::k8s
