#include "node/gpu_health_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace gpuslice::node {
namespace {

class GpuHealthFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-health-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& text) { std::ofstream(root_ + "/" + kGpuHealthFile) << text; }
  std::string root_;
};

TEST_F(GpuHealthFileTest, RoundTripsAndNoFileMeansEveryGpuHealthy) {
  auto none = LoadUnhealthyGpus(root_);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());

  const std::vector<UnhealthyGpu> gpus = {{"GPU-11111111-2222-3333-4444-555555555555", 79, 1795000000},
                                          {"GPU-aaaaaaaa-2222-3333-4444-555555555555", 48, 1795000100}};
  ASSERT_TRUE(StoreUnhealthyGpus(root_, gpus).ok());
  auto loaded = LoadUnhealthyGpus(root_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(*loaded, gpus);
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/" + kGpuHealthFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/" + kGpuHealthFile + ".tmp"));

  ASSERT_TRUE(StoreUnhealthyGpus(root_, {}).ok());
  loaded = LoadUnhealthyGpus(root_);
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->empty()) << "all cleared";
}

TEST_F(GpuHealthFileTest, AMalformedFileIsAnErrorNamingTheLineAndTheFix) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "is not a GPU health record"},
      {"gpuslice-gpu-health 2\n", "is not a GPU health record"},
      {"gpuslice-gpu-health 1\nGPU-1 79\n", "bad line \"GPU-1 79\""},
      {"gpuslice-gpu-health 1\nMIG-1 79 5\n", "bad line \"MIG-1 79 5\""},
      {"gpuslice-gpu-health 1\nGPU-1 79 5 extra\n", "bad line"},
  };
  for (const auto& [text, want] : bad) {
    Write(text);
    auto r = LoadUnhealthyGpus(root_);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("remove"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace gpuslice::node
