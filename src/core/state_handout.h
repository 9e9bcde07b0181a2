// state_handout.h — how a vGPU's processes receive its shared memory from
// the daemon, instead of opening files anyone could truncate.
//
// A vGPU made by the daemon has no `ledger` file and no `boards`: its ledger
// and its GPUs' pacing boards are sealed memfds (port/sealed_memfd.h), kept
// by the state keeper (node/state_keeper.h), which hands them out on
// `<vgpu dir>/state.sock`. A client connects and, without sending anything,
// receives one message:
//
//   gpuslice-state 1\n            the protocol version
//   ledger\n                      first descriptor: the vGPU's Ledger
//   board <32 hex digits>\n       next ones: one Board per GPU, by UUID
//
// The socket sits in the vGPU's own directory with its owner-only (or group)
// mode, so only the vGPU's processes reach it, as they reached the ledger
// file before. The client checks every region's seals and size before it is
// mapped (CheckSealed), so whatever answers on the socket, no mapping made
// from it can fault.
//
// Slow paths only: a process fetches once, when it attaches (never on a
// launch or an allocation). Functions allocate and make syscalls; FetchState
// blocks at most its timeout. Thread-safe.
#ifndef GPUSLICE_CORE_STATE_HANDOUT_H_
#define GPUSLICE_CORE_STATE_HANDOUT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "port/unique_fd.h"

namespace gpuslice::core {

inline constexpr char kStateSocketName[] = "state.sock";
inline constexpr char kHandoutHeader[] = "gpuslice-state 1";
// How long a client waits for the keeper's answer. The keeper answers at
// accept, so only a stopped or wedged keeper makes anyone wait this long.
inline constexpr int kHandoutTimeoutMs = 2000;

using GpuUuid = std::array<uint8_t, 16>;

struct HandedBoard {
  GpuUuid uuid{};
  port::UniqueFd fd;
};

// What a vGPU's processes receive: descriptors, checked, not yet mapped.
struct HandedState {
  port::UniqueFd ledger;
  std::vector<HandedBoard> boards;
  // The board of `uuid`, or -1.
  int BoardFd(const uint8_t uuid[16]) const;
};

// `<dir>/state.sock`.
std::string StateSocketPath(const std::string& vgpu_dir);
// True when the vGPU at `dir` hands its state out (a socket is there).
bool HandsOutState(const std::string& vgpu_dir);

// Connects to the vGPU's socket and receives its regions, each checked to be
// sealed and of its layout's size. Errors say what failed and what to do.
StatusOr<HandedState> FetchState(const std::string& vgpu_dir, int timeout_ms = kHandoutTimeoutMs);

// The keeper's side: sends `ledger_fd` and `boards` (uuid, fd) on a freshly
// accepted connection `conn`.
Status SendState(int conn, int ledger_fd, const std::vector<std::pair<GpuUuid, int>>& boards);

// The message SendState sends, and its parser (exposed for tests): the
// uuids of the boards, in descriptor order after the ledger.
std::string FormatHandout(const std::vector<GpuUuid>& boards);
StatusOr<std::vector<GpuUuid>> ParseHandout(const std::string& text);

// 32 lowercase hex digits, and back.
std::string UuidHex(const GpuUuid& uuid);
bool ParseUuidHex(const std::string& text, GpuUuid* uuid);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_STATE_HANDOUT_H_
