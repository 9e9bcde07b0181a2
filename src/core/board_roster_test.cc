#include "core/board_roster.h"

#include <gtest/gtest.h>

namespace gpuslice::core {
namespace {

RosterEntry Entry(uint8_t gpu, uint64_t id, uint32_t level, uint32_t weight, uint32_t cap, const char* name) {
  RosterEntry e;
  e.gpu.fill(gpu);
  e.vgpu_id = id;
  e.level = level;
  e.weight = weight;
  e.cap_pct = cap;
  e.name = name;
  return e;
}

TEST(BoardRosterTest, ParsesWhatItFormats) {
  const std::vector<RosterEntry> in = {Entry(0xab, 0x8000000000000001ull, 257, 30, 0, "serving"),
                                       Entry(0x01, 5, 0, 70, 25, "training")};
  const std::string text = FormatRoster(in);
  EXPECT_EQ(text.substr(0, text.find('\n')), kRosterHeader);
  auto out = ParseRoster(text);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].gpu, in[0].gpu);
  EXPECT_EQ((*out)[0].vgpu_id, in[0].vgpu_id);
  EXPECT_EQ((*out)[0].level, 257u);
  EXPECT_EQ((*out)[1].weight, 70u);
  EXPECT_EQ((*out)[1].cap_pct, 25u);
  EXPECT_EQ((*out)[1].name, "training");
  EXPECT_TRUE(ParseRoster(std::string(kRosterHeader) + "\n")->empty());
}

TEST(BoardRosterTest, RefusesWhatItDidNotWriteAndSaysWhichLine) {
  const std::string gpu(32, 'a');
  const std::string head = std::string(kRosterHeader) + "\n";
  for (const std::string& bad : {head + gpu + " 0000000000000001 0 101 0 x\n",   // weight over 100
                                 head + gpu + " 0000000000000000 0 50 0 x\n",    // id 0 means a free row
                                 head + gpu + " 01 0 50 0 x\n",                  // short id
                                 head + gpu.substr(1) + "g 0000000000000001 0 50 0 x\n",
                                 head + gpu + " 0000000000000001 -1 50 0 x\n",
                                 head + gpu + " 0000000000000001 0 50 0\n"}) {
    auto parsed = ParseRoster(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("roster line 2"), std::string::npos) << parsed.status().message();
  }
  auto no_header = ParseRoster("");
  ASSERT_FALSE(no_header.ok());
  EXPECT_NE(no_header.status().message().find("does not begin with"), std::string::npos);
}

TEST(BoardTrustTest, FindsExactlyWhatItWasGiven) {
  BoardTrust trust;
  TrustedMember t;
  EXPECT_FALSE(trust.Find(7, &t)) << "an empty trust believes nobody";
  trust.Reset({{7, {1, 30, 0}}, {9, {0, 70, 50}}});
  ASSERT_TRUE(trust.Find(7, &t));
  EXPECT_EQ(t.level, 1u);
  EXPECT_EQ(t.weight, 30u);
  ASSERT_TRUE(trust.Find(9, &t));
  EXPECT_EQ(t.cap_pct, 50u);
  EXPECT_FALSE(trust.Find(8, &t));
  EXPECT_FALSE(trust.Find(0, &t));
  trust.Reset({{9, {0, 40, 0}}});
  EXPECT_FALSE(trust.Find(7, &t)) << "a vGPU dropped from the roster is no longer believed";
  ASSERT_TRUE(trust.Find(9, &t));
  EXPECT_EQ(t.weight, 40u);
  EXPECT_EQ(trust.size(), 1);
}

TEST(BoardTrustTest, HoldsItsCapacityAndNoMore) {
  std::vector<std::pair<uint64_t, TrustedMember>> many;
  for (uint64_t id = 1; id <= BoardTrust::kCapacity + 10; ++id) many.push_back({id * 0x100000001ull, {}});
  BoardTrust trust;
  trust.Reset(many);
  EXPECT_EQ(trust.size(), BoardTrust::kCapacity);
  TrustedMember t;
  int found = 0;
  for (const auto& [id, what] : many) found += trust.Find(id, &t) ? 1 : 0;
  EXPECT_EQ(found, BoardTrust::kCapacity);
}

}  // namespace
}  // namespace gpuslice::core
