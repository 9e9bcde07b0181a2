#include "daemon/board_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "core/board_roster.h"
#include "port/clock.h"

namespace gpuslice::daemon {
namespace {

using core::Board;
using core::GateDecision;
using core::MemberSpec;

constexpr uint64_t kNow = 10'000'000'000;
const std::map<uint64_t, BoardSampler::Listed> kListed = {{1, {"a", 100}}, {2, {"b", 100}}, {3, {"c", 100}}};
constexpr policy::ShareMode kTurns = policy::ShareMode::kTurns;

std::unique_ptr<Board> NewBoard() {
  auto board = std::make_unique<Board>();
  core::InitBoard(board.get());
  return board;
}

TEST(BoardSamplerTest, TheHolderWithWorkQueuedIsWhatTheGpuRuns) {
  auto board = NewBoard();
  const int a = core::JoinBoard(board.get(), 1, MemberSpec{}, kNow);
  const int b = core::JoinBoard(board.get(), 2, MemberSpec{}, kNow);
  ASSERT_EQ(core::TryEnter(board.get(), a, kNow), GateDecision::kGo);
  ASSERT_EQ(core::TurnHolder(*board), a);
  core::NoteBusy(board.get(), a, true, kNow);
  core::NoteBusy(board.get(), b, true, kNow);  // queued behind the holder: it does not run
  std::map<std::string, double> credit;
  BoardSampler::Credit(*board, kListed, kTurns, kNow, 0.001, &credit);
  EXPECT_EQ(credit, (std::map<std::string, double>{{"a", 0.001}}));
}

TEST(BoardSamplerTest, WhileTheHolderHasNothingQueuedTheBusyOthersShareTheGaps) {
  auto board = NewBoard();
  const int a = core::JoinBoard(board.get(), 1, MemberSpec{}, kNow);
  const int b = core::JoinBoard(board.get(), 2, MemberSpec{}, kNow);
  const int c = core::JoinBoard(board.get(), 3, MemberSpec{}, kNow);
  ASSERT_EQ(core::TryEnter(board.get(), a, kNow), GateDecision::kGo);
  core::NoteBusy(board.get(), b, true, kNow);
  core::NoteBusy(board.get(), c, true, kNow);
  std::map<std::string, double> credit;
  BoardSampler::Credit(*board, kListed, kTurns, kNow, 0.002, &credit);
  EXPECT_EQ(credit, (std::map<std::string, double>{{"b", 0.001}, {"c", 0.001}}));
}

// Shares by slices (the node's default): each busy row's channel groups run
// its share of the period, whoever holds the board's turn.
TEST(BoardSamplerTest, UnderSharesBySlicesTheBusyRowsShareByTheirWeights) {
  auto board = NewBoard();
  const int a = core::JoinBoard(board.get(), 1, MemberSpec{}, kNow);
  const int b = core::JoinBoard(board.get(), 2, MemberSpec{}, kNow);
  const int c = core::JoinBoard(board.get(), 3, MemberSpec{}, kNow);
  ASSERT_EQ(core::TryEnter(board.get(), a, kNow), GateDecision::kGo);
  core::NoteBusy(board.get(), a, true, kNow);
  core::NoteBusy(board.get(), b, true, kNow);
  core::NoteBusy(board.get(), c, false, kNow);
  const std::map<uint64_t, BoardSampler::Listed> listed = {{1, {"a", 30}}, {2, {"b", 70}}, {3, {"c", 50}}};
  std::map<std::string, double> credit;
  BoardSampler::Credit(*board, listed, policy::ShareMode::kSlices, kNow, 0.010, &credit);
  ASSERT_EQ(credit.size(), 2u);
  EXPECT_DOUBLE_EQ(credit["a"], 0.003);
  EXPECT_DOUBLE_EQ(credit["b"], 0.007);
}

// While a capped vGPU holds its turn, the others backfill at the short slice
// (core::CappedTurnHeldByOther): the GPU runs the holder while it is busy.
// Its cap is the roster's, as the pacer trusts it, never the row's.
TEST(BoardSamplerTest, UnderSharesBySlicesABusyCappedHolderRunsAlone) {
  auto board = NewBoard();
  const int a = core::JoinBoard(board.get(), 1, MemberSpec{}, kNow);
  const int b = core::JoinBoard(board.get(), 2, MemberSpec{}, kNow);
  ASSERT_EQ(core::TryEnter(board.get(), a, kNow), GateDecision::kGo);
  core::NoteBusy(board.get(), a, true, kNow);
  core::NoteBusy(board.get(), b, true, kNow);
  std::map<std::string, double> credit;
  const std::map<uint64_t, BoardSampler::Listed> capped = {{1, {"a", 30, 30}}, {2, {"b", 70}}};
  BoardSampler::Credit(*board, capped, policy::ShareMode::kSlices, kNow, 0.010, &credit);
  EXPECT_EQ(credit, (std::map<std::string, double>{{"a", 0.010}}));
  // The same board, the holder uncapped in the roster: shared by weight.
  credit.clear();
  const std::map<uint64_t, BoardSampler::Listed> uncapped = {{1, {"a", 30}}, {2, {"b", 70}}};
  BoardSampler::Credit(*board, uncapped, policy::ShareMode::kSlices, kNow, 0.010, &credit);
  EXPECT_DOUBLE_EQ(credit["a"], 0.003);
  EXPECT_DOUBLE_EQ(credit["b"], 0.007);
  // A capped holder with nothing queued: the busy rows share its turn.
  core::NoteBusy(board.get(), a, false, kNow);
  credit.clear();
  BoardSampler::Credit(*board, capped, policy::ShareMode::kSlices, kNow, 0.010, &credit);
  EXPECT_EQ(credit, (std::map<std::string, double>{{"b", 0.010}}));
}

TEST(BoardSamplerTest, NothingQueuedCreditsNobody) {
  auto board = NewBoard();
  const int a = core::JoinBoard(board.get(), 1, MemberSpec{}, kNow);
  core::JoinBoard(board.get(), 2, MemberSpec{}, kNow);
  ASSERT_EQ(core::TryEnter(board.get(), a, kNow), GateDecision::kGo);
  std::map<std::string, double> credit;
  BoardSampler::Credit(*board, kListed, kTurns, kNow, 0.001, &credit);
  EXPECT_TRUE(credit.empty());
}

TEST(BoardSamplerTest, RowsTheRosterDoesNotListAndDeadRowsAreIgnored) {
  auto board = NewBoard();
  const int forged = core::JoinBoard(board.get(), 99, MemberSpec{}, kNow);  // in no roster
  const int dead = core::JoinBoard(board.get(), 2, MemberSpec{}, kNow - 2'000'000'000);
  const int live = core::JoinBoard(board.get(), 3, MemberSpec{}, kNow);
  core::NoteBusy(board.get(), forged, true, kNow);
  core::NoteBusy(board.get(), dead, true, kNow);
  core::NoteBusy(board.get(), live, true, kNow);
  std::map<std::string, double> credit;
  BoardSampler::Credit(*board, kListed, kTurns, kNow, 0.001, &credit);
  EXPECT_EQ(credit, (std::map<std::string, double>{{"c", 0.001}}));
}

// The thread: a board in a file, the roster beside it; a busy row is
// credited under its roster name, and Take hands each credit out once.
TEST(BoardSamplerTest, TheThreadCreditsBusyRowsUnderTheirRosterNames) {
  char dir_template[] = "/tmp/gpuslice-board-sampler-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string board_path = dir + "/board";
  {
    auto board = NewBoard();
    std::ofstream out(board_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(board.get()), sizeof(Board));
  }
  core::GpuUuid uuid{};
  uuid[0] = 7;
  core::RosterEntry entry;
  entry.gpu = uuid;
  entry.vgpu_id = 1;
  entry.name = "trainer";
  {
    std::ofstream out(dir + "/roster");
    out << core::FormatRoster({entry});
  }
  auto mapped = port::MappedFile::Open(board_path, sizeof(Board), port::MappedFile::Access::kReadWrite);
  ASSERT_TRUE(mapped.ok()) << mapped.status().message();
  auto* board = static_cast<Board*>(mapped->data());
  const int row = core::JoinBoard(board, 1, MemberSpec{}, port::MonotonicNanos());
  core::NoteBusy(board, row, true, port::MonotonicNanos());

  int maps = 0;
  BoardSampler sampler(
      {{3, uuid}},
      [&](const core::GpuUuid& asked) -> StatusOr<port::MappedFile> {
        EXPECT_EQ(asked, uuid);
        ++maps;
        return port::MappedFile::Open(board_path, sizeof(Board), port::MappedFile::Access::kReadOnly);
      },
      dir + "/roster");
  double credited = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (credited == 0 && std::chrono::steady_clock::now() < deadline) {
    core::Heartbeat(board, row, MemberSpec{}, port::MonotonicNanos());
    const auto taken = sampler.Take(3);
    for (const auto& [name, s] : taken) {
      EXPECT_EQ(name, "trainer");
      credited += s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(credited, 0);
  EXPECT_TRUE(sampler.Take(4).empty()) << "no such GPU";
  core::NoteBusy(board, row, false, port::MonotonicNanos());
  EXPECT_EQ(maps, 1);
  std::remove((dir + "/roster").c_str());
  std::remove(board_path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace gpuslice::daemon
