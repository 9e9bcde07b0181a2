// state_keeper_client.h — the daemon's side of the state keeper
// (state_keeper.h): finds the keeper or starts one, publishes each new
// vGPU's sealed ledger, and sealed boards for its GPUs, to it, and serves
// them again through a new keeper if the keeper dies.
//
// The daemon gives it to its store (core::VgpuStore::set_state_publisher), so
// every vGPU the daemon makes hands out its state. The client keeps its own
// descriptor of every region it publishes or finds (Adopt), so that a keeper
// that died can be replaced with nothing lost while the daemon lives
// (Check). Boards: one per GPU; a GPU's board is asked of the keeper first
// (a restarted daemon must hand out the one applications already map), and
// made here only when the keeper has none.
//
// Thread-safe (one mutex; each call is a round trip to the keeper, about
// 100 µs). Allocates and makes syscalls.
#ifndef GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_
#define GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/state_publisher.h"
#include "core/status.h"
#include "port/unique_fd.h"

namespace gpuslice::daemon {

class StateKeeperClient : public core::StatePublisher {
 public:
  // Pings the keeper of `root`; if none answers, starts `exe state-keeper`
  // (the gpuslice binary) and waits until it answers (bounded).
  // `group`: the group that may use vGPUs (their sockets get mode 0660).
  static StatusOr<std::unique_ptr<StateKeeperClient>> Connect(const std::string& root, const std::string& exe,
                                                              std::optional<gid_t> group);

  Status Publish(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                 const std::vector<core::GpuUuid>& gpus) override;
  void Withdraw(const std::string& name) override;

  // At start: takes a descriptor of every handed-out vGPU in the store (from
  // its socket), so that Check can serve it again. Returns how many.
  size_t Adopt();
  // Pings the keeper; if it is gone or another one answers, makes sure one
  // runs and gives it every vGPU and board this client knows, each vGPU on a
  // new socket at its old path. Run by the housekeeping thread.
  Status Check();

  pid_t keeper_pid() const { return keeper_pid_; }

 private:
  struct Served {
    std::string socket_path;
    port::UniqueFd ledger;
    std::vector<core::GpuUuid> gpus;
  };

  StateKeeperClient(std::string root, std::string exe, std::optional<gid_t> group)
      : root_(std::move(root)), exe_(std::move(exe)), group_(group) {}
  // One request, one answer ("ok ..." or "error ..."), and any descriptors.
  StatusOr<std::string> Ask(const std::string& request, const std::vector<int>& fds,
                            std::vector<port::UniqueFd>* received = nullptr);
  // Ensures a keeper answers; true in *fresh when it is not the one this
  // client last spoke to (so it holds nothing of ours).
  Status EnsureKeeperLocked(bool* fresh);
  Status SpawnKeeper();
  Status EnsureBoardLocked(const core::GpuUuid& uuid);
  Status PublishLocked(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                       const std::vector<core::GpuUuid>& gpus);
  Status ReseedLocked();
  void ShareSocket(const std::string& socket_path) const;

  const std::string root_;
  const std::string exe_;
  const std::optional<gid_t> group_;
  std::mutex mu_;
  pid_t keeper_pid_ = 0;        // guarded by mu_
  std::string keeper_instance_; // guarded by mu_
  std::map<core::GpuUuid, port::UniqueFd> boards_;  // guarded by mu_: our copies
  std::map<std::string, Served> served_;            // guarded by mu_
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_
