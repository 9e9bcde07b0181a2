#include "core/vgpu_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>

#include "core/pacing_board.h"

namespace gpuslice::core {
namespace {

class VgpuStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuslice-store-test-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  static VgpuSpec Spec(const std::string& name, uint64_t limit) {
    VgpuSpec spec;
    spec.name = name;
    DeviceSpec d;
    d.uuid[0] = 0xfa;
    d.memory_limit_bytes = limit;
    spec.devices.push_back(d);
    return spec;
  }

  std::string root_;
};

TEST_F(VgpuStoreTest, CreatesThenJoins) {
  VgpuStore store(root_);
  bool created = false;
  auto dir = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_TRUE(created);
  auto again = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(dir.value(), again.value());
  EXPECT_EQ(store.List(), std::vector<std::string>{"a"});
}

TEST_F(VgpuStoreTest, LimitsFileIsReadOnlyAndOwnerOnlyDirectory) {
  VgpuStore store(root_);
  bool created;
  auto dir = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_TRUE(dir.ok());
  struct stat st;
  ASSERT_EQ(stat((dir.value() + "/limits").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  ASSERT_EQ(stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto handle = VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->limits().devices[0].memory_limit_bytes, 1u << 20);
}

TEST_F(VgpuStoreTest, JoiningWithDifferentLimitsIsRefusedWithAFix) {
  VgpuStore store(root_);
  bool created;
  ASSERT_TRUE(store.CreateOrJoin(Spec("a", 1 << 20), true, &created).ok());
  auto other = store.CreateOrJoin(Spec("a", 2 << 20), true, &created);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("join it without --memory"), std::string::npos);
  EXPECT_TRUE(store.CreateOrJoin(Spec("a", 2 << 20), false, &created).ok());  // not explicit: joins
}

TEST_F(VgpuStoreTest, CorruptedStateIsReportedWithTheFix) {
  VgpuStore store(root_);
  bool created;
  auto dir = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_TRUE(dir.ok());
  chmod((dir.value() + "/limits").c_str(), 0644);
  { std::ofstream(dir.value() + "/limits", std::ios::in | std::ios::out) << "garbage!"; }
  auto joined = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_FALSE(joined.ok());
  EXPECT_NE(joined.status().message().find("corrupted"), std::string::npos) << joined.status().message();
  EXPECT_NE(joined.status().message().find("delete " + dir.value()), std::string::npos);
  std::filesystem::resize_file(dir.value() + "/ledger", 10);
  EXPECT_FALSE(VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly).ok());
}

TEST_F(VgpuStoreTest, AVgpuOfTheOlderLayoutIsNamedByItsVersionNotCalledCorrupted) {
  VgpuStore store(root_);
  bool created;
  auto dir = store.CreateOrJoin(Spec("old", 1 << 20), true, &created);
  ASSERT_TRUE(dir.ok());
  // What a layout-1 gpuslice wrote: version 1, and a ledger 256 bytes shorter
  // (no LC latency histogram).
  const std::string limits_path = dir.value() + "/limits";
  chmod(limits_path.c_str(), 0644);
  {
    std::fstream f(limits_path, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t v1 = 1;
    f.seekp(offsetof(FileHeader, version));
    f.write(reinterpret_cast<const char*>(&v1), sizeof v1);
  }
  std::filesystem::resize_file(dir.value() + "/ledger", sizeof(Ledger) - 256);
  auto opened = VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly);
  ASSERT_FALSE(opened.ok());
  const std::string& message = opened.status().message();
  EXPECT_NE(message.find("layout version 1, this gpuslice reads version " + std::to_string(kLayoutVersion)),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("corrupted"), std::string::npos) << message;
}

// A node upgraded to a new board version, or a board a tenant truncated:
// the next join makes a board every library of this version accepts.
TEST_F(VgpuStoreTest, AJoinReplacesABoardOfAnotherVersionOrSize) {
  VgpuStore store(root_);
  bool created = false;
  auto dir = store.CreateOrJoin(Spec("a", 1 << 20), true, &created);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const std::string path = root_ + "/boards/" + BoardFileName(Spec("a", 1).devices[0].uuid.data());
  const auto version_of = [&] {
    Board board{};
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&board), sizeof board);
    return in.gcount() == static_cast<std::streamsize>(sizeof board) ? board.header.version : 0u;
  };
  ASSERT_EQ(version_of(), kBoardVersion);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t older = kBoardVersion - 1;
    f.seekp(offsetof(FileHeader, version));
    f.write(reinterpret_cast<const char*>(&older), sizeof older);
  }
  ASSERT_NE(version_of(), kBoardVersion);
  ASSERT_TRUE(store.CreateOrJoin(Spec("a", 1 << 20), true, &created).ok());
  EXPECT_EQ(version_of(), kBoardVersion);
  ASSERT_EQ(truncate(path.c_str(), 64), 0);
  ASSERT_TRUE(store.CreateOrJoin(Spec("a", 1 << 20), true, &created).ok());
  EXPECT_EQ(version_of(), kBoardVersion);
}

TEST_F(VgpuStoreTest, RejectsBadNames) {
  for (const char* bad : {"", ".hidden", "a/b", "a b", "../x", "x\n"}) {
    EXPECT_FALSE(VgpuStore::ValidateName(bad).ok()) << bad;
  }
  EXPECT_FALSE(VgpuStore::ValidateName(std::string(64, 'a')).ok());
  EXPECT_TRUE(VgpuStore::ValidateName("train-job_1.v2").ok());
}

TEST_F(VgpuStoreTest, RemovedOnlyWhenNoMemberHoldsIt) {
  VgpuStore store(root_);
  bool created;
  ASSERT_TRUE(store.CreateOrJoin(Spec("a", 1 << 20), true, &created).ok());
  auto member = store.HoldMembership("a");
  ASSERT_TRUE(member.ok());
  auto removed = store.RemoveIfUnused("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed.value());
  close(member.value());
  removed = store.RemoveIfUnused("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed.value());
  EXPECT_TRUE(store.List().empty());
}

TEST(VgpuStoreRootOf, IsTheInverseOfDirOf) {
  VgpuStore store("/var/lib/gpuslice");
  EXPECT_EQ(VgpuStore::RootOf(store.DirOf("train-a")), "/var/lib/gpuslice");
}

}  // namespace
}  // namespace gpuslice::core
