// An LC pod's latency SLO: read from its annotations, predicted on a placed
// GPU (lc_slo.h), and used by the extender's prioritize.
#include "k8s/lc_slo.h"

#include <gtest/gtest.h>

#include "k8s/extender.h"
#include "k8s/names.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::MakePod;
using testing::ReadFixture;

json LcAnnotations(const std::string& slo, const std::string& alone) {
  return {{kPriorityAnnotation, "lc"}, {kLcSloP99Annotation, slo}, {kLcAloneP99Annotation, alone}};
}

TEST(LcSlo, ReadFromAnnotations) {
  auto pod = ParsePodRequest(MakePod("ns", "p", "uid", {{"a", 50, 8}}, LcAnnotations("800", "480")));
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->lc_slo_p99_us, 800u);
  EXPECT_EQ(pod->lc_alone_p99_us, 480u);
  auto none = ParsePodRequest(MakePod("ns", "p", "uid", {{"a", 50, 8}}, {{kPriorityAnnotation, "lc"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->lc_slo_p99_us, 0u);
}

TEST(LcSlo, BadAnnotationsNameTheProblemAndTheFix) {
  struct Case {
    json annotations;
    const char* want;
  } cases[] = {
      {LcAnnotations("fast", "480"), "set it to a whole number of microseconds above 0"},
      {LcAnnotations("800", "0"), "set it to a whole number of microseconds above 0"},
      {LcAnnotations("800us", "480"), "set it to a whole number of microseconds above 0"},
      {{{kPriorityAnnotation, "lc"}, {kLcSloP99Annotation, "800"}}, "needs both"},
      {{{kLcSloP99Annotation, "800"}, {kLcAloneP99Annotation, "480"}}, "are for latency-critical pods"},
  };
  for (const Case& c : cases) {
    auto pod = ParsePodRequest(MakePod("ns", "p", "uid", {{"a", 50, 8}}, c.annotations));
    ASSERT_FALSE(pod.ok()) << c.annotations.dump();
    EXPECT_NE(pod.status().message().find(c.want), std::string::npos) << pod.status().message();
    EXPECT_NE(pod.status().message().find("ns/p"), std::string::npos) << pod.status().message();
  }
}

TEST(LcSlo, PredictionAddsTheSliceBesideLcAndOneSwitchOnlyWhenShared) {
  EXPECT_EQ(PredictedLcP99Us(300, false), 300u);
  EXPECT_EQ(PredictedLcP99Us(300, true), 300u + 50u + 175u);
}

TEST(LcSlo, PlacementOnASharedGpuBreaksATightSlo) {
  PodRequest pod;
  pod.priority_level = "lc";
  pod.lc_alone_p99_us = 100;
  pod.lc_slo_p99_us = 300;  // alone 100 + 225 beside BE = 325 > 300
  std::vector<GpuState> before = {{0, true, 60, 0, 100}, {1, true, 0, 0, 100}};
  PodPlacement on_shared{{{"a", {0}}}, 1.0};
  PodPlacement on_empty{{{"a", {1}}}, 1.0};
  EXPECT_FALSE(PlacementMeetsLcSlo(pod, before, on_shared));
  EXPECT_TRUE(PlacementMeetsLcSlo(pod, before, on_empty));
  // two containers of the pod on one empty GPU share it
  EXPECT_FALSE(PlacementMeetsLcSlo(pod, before, PodPlacement{{{"a", {1}}, {"b", {1}}}, 1.0}));
  pod.lc_slo_p99_us = 325;  // exactly the prediction: kept
  EXPECT_TRUE(PlacementMeetsLcSlo(pod, before, on_shared));
  pod.lc_slo_p99_us = 0;  // no SLO declared
  EXPECT_TRUE(PlacementMeetsLcSlo(pod, before, on_shared));
}

std::map<std::string, int64_t> PrioritizeScores(const json& args, PackingPolicy policy) {
  Extender extender({policy}, nullptr);
  const HttpReply reply = extender.Prioritize(args.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  std::map<std::string, int64_t> scores;
  for (const json& h : json::parse(reply.body)) scores[h["Host"]] = h["Score"];
  return scores;
}

// The LC pod of the shared-GPU fixture: binpack puts it on node a's busy GPU
// 0 (60 vcore used), node b's GPUs are empty.
TEST(ExtenderPrioritize, AnLcSloThatASharedGpuBreaksRanksTheNodeLast) {
  json args = json::parse(ReadFixture("extender/filter_args_shared_gpu_pod.json"));
  auto base = PrioritizeScores(args, PackingPolicy::kBinpack);
  ASSERT_GT(base["gpu-node-a"], base["gpu-node-b"]);  // the fuller GPU, without an SLO

  json& annotations = args["Pod"]["metadata"]["annotations"];
  annotations[kLcAloneP99Annotation] = "480";
  annotations[kLcSloP99Annotation] = "600";  // 480 + 225 = 705 beside BE: broken on node a
  auto tight = PrioritizeScores(args, PackingPolicy::kBinpack);
  EXPECT_EQ(tight["gpu-node-a"], 0);
  EXPECT_EQ(tight["gpu-node-b"], base["gpu-node-b"]);
  EXPECT_GT(tight["gpu-node-b"], 0);

  annotations[kLcSloP99Annotation] = "800";  // met anywhere: the packing decides again
  EXPECT_EQ(PrioritizeScores(args, PackingPolicy::kBinpack), base);

  // Filter is unchanged: the SLO ranks, it does not exclude.
  annotations[kLcSloP99Annotation] = "600";
  Extender extender({PackingPolicy::kBinpack}, nullptr);
  const json filtered = json::parse(extender.Filter(args.dump()).body);
  ASSERT_EQ(filtered["Nodes"]["items"].size(), 2u);
}

}  // namespace
}  // namespace gpuslice::k8s
