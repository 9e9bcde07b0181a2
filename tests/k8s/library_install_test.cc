// install-library: the plugins' init container copies the library to the
// node by rename, so a container mounting the old file keeps it whole.
#include "k8s/library_install.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST(InstallLibrary, CopiesEveryFileAndReplacesTheOldOnesByRename) {
  TempDir dir;
  std::filesystem::create_directories(dir / "image/shim");
  WriteFile(dir / "image/libgpuslice-cuda.so", "new interposer");
  WriteFile(dir / "image/shim/libcuda.so.1", "new shim");
  std::filesystem::create_directories(dir / "node");
  WriteFile(dir / "node/libgpuslice-cuda.so", "old interposer");
  struct stat old_file;
  ASSERT_EQ(stat((dir / "node/libgpuslice-cuda.so").c_str(), &old_file), 0);

  ASSERT_TRUE(InstallLibrary(dir / "image", dir / "node").ok());

  EXPECT_EQ(ReadFile(dir / "node/libgpuslice-cuda.so"), "new interposer");
  EXPECT_EQ(ReadFile(dir / "node/shim/libcuda.so.1"), "new shim");
  struct stat installed;
  ASSERT_EQ(stat((dir / "node/libgpuslice-cuda.so").c_str(), &installed), 0);
  EXPECT_NE(installed.st_ino, old_file.st_ino) << "a new file, renamed over the old: mounts of the old keep it";
  EXPECT_EQ(installed.st_mode & 0777, 0755u);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::recursive_directory_iterator(dir / "node")) ++entries;
  EXPECT_EQ(entries, 3u) << "no staged file is left behind";
}

TEST(InstallLibrary, AMissingSourceFileIsNamedAndNothingIsInstalledFromIt) {
  TempDir dir;
  std::filesystem::create_directories(dir / "image");
  WriteFile(dir / "image/libgpuslice-cuda.so", "interposer");

  const Status s = InstallLibrary(dir / "image", dir / "node");

  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("shim/libcuda.so.1 is missing"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--from"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "node/shim/libcuda.so.1"));
}

}  // namespace
}  // namespace gpuslice::k8s
