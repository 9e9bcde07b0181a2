#include "node/state_recovery.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "port/sealed_memfd.h"

namespace gpuslice::node {
namespace {

TEST(StateRecord, RoundTripsAndBadRecordsNameTheirLine) {
  StateRecord record;
  record.ledger = {77, 12345};
  core::GpuUuid gpu{};
  gpu[0] = 0xab;
  gpu[15] = 0x01;
  record.boards.emplace_back(gpu, MemoryId{77, 999});
  auto parsed = ParseStateRecord(FormatStateRecord(record));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->ledger, record.ledger);
  ASSERT_EQ(parsed->boards.size(), 1u);
  EXPECT_EQ(parsed->boards[0].first, gpu);
  EXPECT_EQ(parsed->boards[0].second, (MemoryId{77, 999}));

  const std::pair<const char*, const char*> bad[] = {
      {"", "not a state record"},
      {"gpuslice-state-record 2\nledger 1 2\n", "not a state record"},
      {"gpuslice-state-record 1\n", "names no ledger"},
      {"gpuslice-state-record 1\nledger 1\n", "bad state record line: \"ledger 1\""},
      {"gpuslice-state-record 1\nledger 1 2\nboard zz 1 2\n", "bad GPU in state record line"},
      {"gpuslice-state-record 1\nledger 1 2\nslot 1 2\n", "bad state record line: \"slot 1 2\""},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseStateRecord(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

// Only the very inode is opened: a sealed memfd of the right size that this
// process maps, but not the recorded one, is not taken.
TEST(OpenMappedMemory, TakesOnlyTheRecordedInode) {
  constexpr size_t kSize = 4096;
  auto made = port::CreateSealedMemfd("gpuslice-ledger-x", nullptr, kSize);
  ASSERT_TRUE(made.ok());
  port::UniqueFd fd(made.value());
  void* map = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED);
  auto id = IdentityOf(fd.get());
  ASSERT_TRUE(id.ok());
  fd.reset();  // only the mapping holds it now, as in an application

  MemoryId other = id.value();
  other.ino += 1;
  auto none = OpenMappedMemory("/proc", other, kSize, "ledger");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no running process maps the ledger"), std::string::npos);
  EXPECT_FALSE(OpenMappedMemory("/proc", id.value(), kSize * 2, "ledger").ok()) << "not of its layout's size";

  auto found = OpenMappedMemory("/proc", id.value(), kSize, "ledger");
  if (!found.ok() && found.status().message().find("CAP_SYS_ADMIN") != std::string::npos) {
    munmap(map, kSize);
    GTEST_SKIP() << found.status().message();
  }
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(IdentityOf(found->get()).value(), id.value());
  munmap(map, kSize);
}

// Many lost regions are looked for in one pass: each gets its own answer,
// in the order asked, whether found, of the wrong size or mapped by nobody.
TEST(OpenMappedMemories, AnswersEachRegionOfOnePass) {
  constexpr size_t kSize = 4096;
  std::vector<void*> maps;
  std::vector<MemoryId> ids;
  for (const char* name : {"gpuslice-ledger-a", "gpuslice-board-b"}) {
    auto made = port::CreateSealedMemfd(name, nullptr, kSize);
    ASSERT_TRUE(made.ok());
    port::UniqueFd fd(made.value());
    maps.push_back(mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0));
    ASSERT_NE(maps.back(), MAP_FAILED);
    ids.push_back(IdentityOf(fd.get()).value());
  }
  MemoryId gone = ids[1];
  gone.ino += 1000;
  auto opened = OpenMappedMemories("/proc", {{ids[0], kSize, "ledger a"},
                                             {gone, kSize, "ledger of nobody"},
                                             {ids[1], kSize * 2, "board of the wrong size"},
                                             {ids[1], kSize, "board b"}});
  ASSERT_EQ(opened.size(), 4u);
  EXPECT_NE(opened[1].status().message().find("no running process maps the ledger of nobody"), std::string::npos);
  EXPECT_FALSE(opened[2].ok());
  for (size_t i : {0u, 3u}) {
    if (!opened[i].ok() && opened[i].status().message().find("CAP_SYS_ADMIN") != std::string::npos) {
      for (void* m : maps) munmap(m, kSize);
      GTEST_SKIP() << opened[i].status().message();
    }
    ASSERT_TRUE(opened[i].ok()) << opened[i].status().message();
  }
  EXPECT_EQ(IdentityOf(opened[0]->get()).value(), ids[0]);
  EXPECT_EQ(IdentityOf(opened[3]->get()).value(), ids[1]);
  for (void* m : maps) munmap(m, kSize);
}

}  // namespace
}  // namespace gpuslice::node
