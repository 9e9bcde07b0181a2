#include "node/policy_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace gpuslice::node {
namespace {

class PolicyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-policy-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(PolicyFileTest, StoredLevelsAreWhatEveryStandaloneCommandResolvesWith) {
  // Nothing stored: the default levels.
  auto none = LoadLevels(root_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Find("critical").has_value());

  ASSERT_TRUE(StoreLevels(root_, "levels:\n  - {name: gold, class: lc}\n  - {name: tin, class: be}\n").ok());
  auto stored = LoadLevels(root_);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->Names(), "gold, lc, tin, be");
  EXPECT_EQ(std::filesystem::status(root_ + "/levels.yaml").permissions() & std::filesystem::perms::all,
            std::filesystem::perms(0644));

  // A daemon restarted without `levels:` takes the stored ones away.
  ASSERT_TRUE(StoreLevels(root_, "").ok());
  EXPECT_FALSE(std::filesystem::exists(root_ + "/levels.yaml"));
  EXPECT_TRUE(LoadLevels(root_)->Find("critical").has_value());
}

TEST_F(PolicyFileTest, TheShareModeAndTurnStyleRoundTripAndUnknownOnesAreRefused) {
  EXPECT_EQ(LoadPolicyConfig(root_)->be_shares, policy::ShareMode::kSlices) << "none stored: the default";
  EXPECT_EQ(LoadPolicyConfig(root_)->be_turns, policy::TurnStyle::kBackfill) << "none stored: the default";
  policy::TimeslicePolicyConfig config;
  config.be_shares = policy::ShareMode::kTurns;
  config.be_turns = policy::TurnStyle::kExclusive;
  config.be_period_us = 20000;
  ASSERT_TRUE(StorePolicyConfig(root_, config).ok());
  auto loaded = LoadPolicyConfig(root_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->be_shares, policy::ShareMode::kTurns);
  EXPECT_EQ(loaded->be_turns, policy::TurnStyle::kExclusive);
  EXPECT_EQ(loaded->be_period_us, 20000u);

  for (const char* bad : {"be_shares fastest\n", "be_period_us turns\n", "be_shares\n", "be_turns slices\n"}) {
    std::ofstream(root_ + "/" + kPolicyFileName) << bad;
    auto refused = LoadPolicyConfig(root_);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("is not a policy setting"), std::string::npos) << bad;
  }
}

TEST_F(PolicyFileTest, ACorruptLevelsFileIsAnErrorNamingTheFix) {
  std::ofstream(root_ + "/levels.yaml") << "levels: [oops";
  auto bad = LoadLevels(root_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(root_ + "/levels.yaml"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("delete the file to use the default levels"), std::string::npos);
}

TEST_F(PolicyFileTest, TheMemoryWaitRoundTripsAndZeroRemovesIt) {
  const std::string& root = root_;
  EXPECT_EQ(LoadMemoryWait(root).value(), 0u) << "none stored: overcommit off";
  ASSERT_TRUE(StoreMemoryWait(root, 30000).ok());
  EXPECT_EQ(LoadMemoryWait(root).value(), 30000u);
  ASSERT_TRUE(StoreMemoryWait(root, 0).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/" + kMemoryWaitFileName));
  EXPECT_EQ(LoadMemoryWait(root).value(), 0u);
  std::ofstream(root + "/" + kMemoryWaitFileName) << "soon\n";
  auto bad = LoadMemoryWait(root);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not hold a number of milliseconds"), std::string::npos);
}

}  // namespace
}  // namespace gpuslice::node
