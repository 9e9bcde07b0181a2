// The plugins' state directory: owner-only, never a group-shared daemon's.
#include "k8s/pod_state_dir.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "core/vgpu_store.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using testing::TempDir;

int Mode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

TEST(PodStateDir, TheHostPathKubeletMadeIsNarrowedToTheOwnerAndMarked) {
  TempDir dir;
  const std::string state = dir / "state";
  std::filesystem::create_directories(state);
  chmod(state.c_str(), 0755);  // kubelet's DirectoryOrCreate
  ASSERT_TRUE(SecurePodStateDir(state).ok());
  EXPECT_EQ(Mode(state), 0700);
  EXPECT_TRUE(std::filesystem::exists(state + "/" + core::kPodsMarker));
  ASSERT_TRUE(SecurePodStateDir(state).ok()) << "a restart finds its own directory fine";
}

TEST(PodStateDir, ADirectoryOpenToAGroupIsRefusedWithTheFix) {
  TempDir dir;
  const std::string state = dir / "state";
  std::filesystem::create_directories(state);
  // A daemon's socket.group: 0710, owned by that group.
  const group* g = getgrnam("nogroup");
  if (g == nullptr || chown(state.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
    GTEST_SKIP() << "cannot give a directory to group nogroup here";
  }
  chmod(state.c_str(), 0710);
  const Status s = SecurePodStateDir(state);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("open to group"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--state-dir"), std::string::npos) << s.message();
  EXPECT_EQ(Mode(state), 0710) << "nothing changed";
  EXPECT_FALSE(std::filesystem::exists(state + "/" + core::kPodsMarker));
}

}  // namespace
}  // namespace gpuslice::k8s
