// state_keeper.h — the process that holds every daemon-made vGPU's sealed
// shared memory and hands it to the vGPU's processes (core/state_handout.h).
//
// Why a process of its own: the memory of a memfd lives only while someone
// holds it. If the daemon held the only copies, a daemon restart would make
// new, empty ledgers and boards while the running applications kept the
// old ones: two ledgers for one vGPU, each process seeing half the usage.
// The keeper outlives daemon restarts (it is started in its own session,
// and the systemd unit has KillMode=process), so a restarted daemon, and
// every process started meanwhile, gets the very same memory. It maps
// nothing, runs no driver code, and has one thread, so it is the least likely
// of all to die; if it does die, see docs/design.md ("The state keeper").
//
// It serves:
//   <root>/.state-keeper.sock   owner-only: the daemon's requests, one per
//                               connection, peer checked to be its own user
//       "ping"                               -> "ok <pid> <instance>"
//       "board\n<hex uuid>"      + [memfd]   -> keeps the GPU's first board
//       "get-board\n<hex uuid>"              -> "ok" + [the board] | "ok none"
//       "vgpu\n<name>\n<socket path>\n<hex uuid>..."
//                                + [listening socket, ledger memfd]
//       "drop\n<name>"                       -> lets the vGPU go
//   each vGPU's state.sock       the handout, at accept
// and exits when its state directory is gone. A vGPU whose socket path is
// gone or replaced (removed by anyone, even a standalone command) is dropped.
//
// Not thread-safe: one thread runs Step in a loop. Allocates; blocks only in
// poll (at most the timeout) and on its own owner's control connection.
#ifndef GPUSLICE_NODE_STATE_KEEPER_H_
#define GPUSLICE_NODE_STATE_KEEPER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/state_handout.h"
#include "core/status.h"
#include "port/unique_fd.h"

namespace gpuslice::node {

inline constexpr char kStateKeeperSocketName[] = ".state-keeper.sock";
std::string StateKeeperSocketPath(const std::string& root);

class StateKeeper {
 public:
  // Binds the control socket in `root` (replacing a dead keeper's).
  static StatusOr<StateKeeper> Listen(const std::string& root);

  // Serves whatever is ready within `timeout_ms`, then checks for a state
  // directory or vGPU sockets that are gone. False: the keeper is done (its
  // directory is gone, or another keeper took its place and it holds nothing).
  bool Step(int timeout_ms);

  size_t vgpu_count() const { return vgpus_.size(); }
  size_t board_count() const { return boards_.size(); }

 private:
  struct Vgpu {
    std::string socket_path;
    dev_t dev = 0;
    ino_t ino = 0;
    port::UniqueFd listen;
    port::UniqueFd ledger;
    std::vector<core::GpuUuid> gpus;
  };

  void ServeControl();
  // The answer to one request, and the descriptors that go with it.
  std::string Handle(const std::string& request, std::vector<port::UniqueFd>& fds, std::vector<int>* out);
  void HandOut(Vgpu& v);
  void DropGone();

  std::string root_;
  std::string instance_;  // tells a new keeper from an old one with the same pid
  port::UniqueFd control_;
  dev_t control_dev_ = 0;
  ino_t control_ino_ = 0;
  bool replaced_ = false;
  std::map<std::string, Vgpu> vgpus_;
  std::map<core::GpuUuid, port::UniqueFd> boards_;
};

// `gpuslice state-keeper`: detaches into its own session, listens, writes one
// byte to `ready_fd` (when >= 0) once the control socket answers, and serves
// until done. Returns the exit code.
int RunStateKeeper(const std::string& root, int ready_fd);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_STATE_KEEPER_H_
