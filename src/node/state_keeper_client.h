// state_keeper_client.h — the daemon's side of the state keeper
// (state_keeper.h): finds the keeper or starts one, publishes each new
// vGPU's sealed ledger, and sealed boards for its GPUs, to it, and serves
// them again through a new keeper if the keeper dies.
//
// The daemon and the Kubernetes plugins give it to their store (core::VgpuStore::set_state_publisher), so
// every vGPU the daemon makes hands out its state. The client keeps its own
// descriptor of every region it publishes or finds (Adopt), so that a keeper
// that died can be replaced with nothing lost while the daemon lives
// (Check). Boards: one per GPU; a GPU's board is asked of the keeper first
// (a restarted daemon must hand out the one applications already map), and
// made here only when the keeper has none, or one of another gpuslice
// version (then a new keeper takes over).
//
// Thread-safe (one mutex; each call is a round trip to the keeper, about
// 100 µs). Allocates and makes syscalls.
#ifndef GPUSLICE_NODE_STATE_KEEPER_CLIENT_H_
#define GPUSLICE_NODE_STATE_KEEPER_CLIENT_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/state_publisher.h"
#include "core/status.h"
#include "port/mapped_file.h"
#include "port/mutex.h"
#include "port/unique_fd.h"

namespace gpuslice::node {

class StateKeeperClient : public core::StatePublisher {
 public:
  struct Options {
    // Who may reach each vGPU's state.sock (connecting needs write): the
    // daemon opens sockets to its socket.group (0660); the Kubernetes
    // plugins to every uid (0666), since a container's processes may run as
    // any user and only that container's mount reaches the socket.
    mode_t socket_mode = 0600;
    std::optional<gid_t> socket_group;
    // Where Adopt looks for processes that map a vGPU's memory
    // (state_recovery.h); the host's /proc (the plugins run with hostPID).
    std::string proc_root = "/proc";
  };

  // Pings the keeper of `root`; if none answers, starts `exe state-keeper`
  // (the gpuslice binary) and waits until it answers (bounded).
  static StatusOr<std::unique_ptr<StateKeeperClient>> Connect(const std::string& root, const std::string& exe,
                                                              Options options);

  Status Publish(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                 const std::vector<core::GpuUuid>& gpus) override EXCLUDES(mu_);
  void Withdraw(const std::string& name) override EXCLUDES(mu_);

  // At start: takes a descriptor of every handed-out vGPU in the store (from
  // its socket), so that Check can serve it again. A vGPU whose socket does
  // not answer (the keeper was gone too) is recovered from a process that
  // maps its memory (state_recovery.h) and served again. Returns how many
  // were taken up.
  size_t Adopt() EXCLUDES(mu_);
  // Pings the keeper; if it is gone or another one answers, makes sure one
  // runs and gives it every vGPU and board this client knows, each vGPU on a
  // new socket at its old path. Run by the housekeeping thread.
  Status Check() EXCLUDES(mu_);

  // A read-only mapping of GPU `uuid`'s board, for the daemon's own readers
  // (daemon/board_sampler.h); an error while no vGPU of the
  // daemon has a board on that GPU. The board is sealed against resizing,
  // so the mapping stays valid for the daemon's life.
  StatusOr<port::MappedFile> MapBoard(const core::GpuUuid& uuid) const EXCLUDES(mu_);

  pid_t keeper_pid() const EXCLUDES(mu_) {
    port::MutexLock lock(&mu_);
    return keeper_pid_;
  }

 private:
  struct Served {
    std::string socket_path;
    port::UniqueFd ledger;
    std::vector<core::GpuUuid> gpus;
  };

  StateKeeperClient(std::string root, std::string exe, Options options)
      : root_(std::move(root)), exe_(std::move(exe)), options_(std::move(options)) {}
  // One request, one answer ("ok ..." or "error ..."), and any descriptors.
  StatusOr<std::string> Ask(const std::string& request, const std::vector<int>& fds,
                            std::vector<port::UniqueFd>* received = nullptr);
  // Ensures a keeper answers; true in *fresh when it is not the one this
  // client last spoke to (so it holds nothing of ours).
  Status EnsureKeeperLocked(bool* fresh) REQUIRES(mu_);
  Status SpawnKeeper();
  // The GPU's board: ours, else the keeper's, else `found` (memory
  // recovered from a process), else a new one, which the keeper is given.
  Status EnsureBoardLocked(const core::GpuUuid& uuid, port::UniqueFd found = port::UniqueFd()) REQUIRES(mu_);
  Status PublishLocked(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                       const std::vector<core::GpuUuid>& gpus) REQUIRES(mu_);
  Status ReseedLocked() REQUIRES(mu_);
  // A keeper that outlived an upgrade (the systemd unit restarts the daemon
  // alone) holds the earlier version's boards, which this version's
  // applications refuse: they would run unpaced, caps not enforced. Each
  // such board of ours is replaced by a new one, and everything goes to a
  // new keeper, since a keeper keeps a GPU's first board. The old keeper
  // serves what it still has until that is gone, then exits
  // (state_keeper.h); running applications keep the boards they map. If no
  // new keeper can start, the old boards stay, and an error names the fix.
  void RenewStaleBoardsLocked() REQUIRES(mu_);
  // Serves vGPU `name` again from its memory, found in a process that maps
  // it (state_recovery.h): its ledger, and each GPU's board where found.
  Status RecoverLocked(const std::string& name, const std::string& dir, StatusOr<port::UniqueFd> ledger,
                       std::vector<std::pair<core::GpuUuid, StatusOr<port::UniqueFd>>> boards) REQUIRES(mu_);
  // What was handed out for the vGPU at `socket_path`: its record beside the socket.
  void RecordLocked(const std::string& socket_path, int ledger_fd, const std::vector<core::GpuUuid>& gpus)
      REQUIRES(mu_);
  void ShareSocket(const std::string& socket_path) const;

  const std::string root_;
  const std::string exe_;
  const Options options_;
  mutable port::Mutex mu_;
  pid_t keeper_pid_ GUARDED_BY(mu_) = 0;
  std::string keeper_instance_ GUARDED_BY(mu_);
  std::map<core::GpuUuid, port::UniqueFd> boards_ GUARDED_BY(mu_);  // our copies
  std::map<std::string, Served> served_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_STATE_KEEPER_CLIENT_H_
