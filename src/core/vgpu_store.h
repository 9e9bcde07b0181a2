// vgpu_store.h — the node's state directory, where vGPUs live.
//
// Layout (see docs/design.md):
//   <root>/                 0700; $GPUSLICE_STATE_DIR, else $XDG_RUNTIME_DIR/gpuslice,
//                           else /run/gpuslice
//   <root>/.lock            flock'd while a vGPU is created, joined or removed
//   <root>/vgpus/<name>/limits   0444, struct Limits (vgpu_layout.h)
//   <root>/vgpus/<name>/ledger   0600, struct Ledger
//   <root>/vgpus/<name>/members  flock'd shared by every `gpuslice run` using it
//   <root>/vgpus/<name>/boards   symlink to ../../boards
//   <root>/boards/gpu-<uuid>     0600, struct Board: GPU turns (pacing_board.h)
// A store with a StatePublisher (the daemon's) makes vGPUs whose ledger and
// boards are sealed memfds handed out on a socket instead (state_handout.h):
//   <root>/vgpus/<name>/state.sock   0600 (0660 for the daemon's group)
// and no `ledger` file, no `boards`. Either kind is opened by VgpuHandle.
//
// A vGPU is created complete in a temporary directory and renamed into place,
// so readers never see a half-written one. All locks are flock(2) locks, which
// the kernel drops when their holder dies: no `kill -9` can leave one held.
//
// Used by the CLI and the daemon (never by the interposer, which only maps an
// existing vGPU through VgpuHandle). Methods wait on the store lock for the
// duration of another create/remove, and at most port::kStateLockWait (a
// holder that long is stopped or hung: the error names it); they allocate and
// make syscalls.
#ifndef GPUSLICE_CORE_VGPU_STORE_H_
#define GPUSLICE_CORE_VGPU_STORE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/state_publisher.h"
#include "core/status.h"
#include "core/vgpu_layout.h"
#include "port/mapped_file.h"

namespace gpuslice::core {

struct DeviceSpec {
  std::array<uint8_t, 16> uuid{};
  uint64_t memory_limit_bytes = kUnlimited;
  uint32_t compute_share_pct = 100;
  uint32_t compute_cap_pct = 0;
  Priority priority = Priority::kBestEffort;
  uint32_t priority_rank = 0;  // the level's rank within its class (LevelWord)
};

struct VgpuSpec {
  std::string name;
  std::vector<DeviceSpec> devices;
  uint32_t memory_wait_ms = 0;  // Limits::memory_wait_ms
  // The node may suspend it to make room for higher levels
  // (node/memory_pressure.h): the file kSuspendableMarker in its directory.
  bool suspendable = false;
};
inline constexpr char kSuspendableMarker[] = "suspendable";
// In a state directory's root: the Kubernetes plugins keep pods' vGPUs
// here, whose directories are open to every uid (k8s/pod_state_dir.h), so
// a node daemon must not open the state directory to a group.
inline constexpr char kPodsMarker[] = "kubernetes-pods";

// An open vGPU: both regions mapped. Limits are mapped read-only unless the
// caller is the vGPU's manager (creator, resizer). The ledger is the file, or,
// for a vGPU that hands out its state, the sealed memfd its socket gives.
class VgpuHandle {
 public:
  static StatusOr<VgpuHandle> Open(const std::string& dir, port::MappedFile::Access limits_access);

  const Limits& limits() const { return *static_cast<const Limits*>(limits_.data()); }
  Limits& mutable_limits() { return *static_cast<Limits*>(limits_.data()); }
  Ledger& ledger() const { return *static_cast<Ledger*>(ledger_.data()); }
  const std::string& dir() const { return dir_; }

 private:
  port::MappedFile limits_;
  port::MappedFile ledger_;
  std::string dir_;
};

class VgpuStore {
 public:
  static std::string DefaultRoot();
  explicit VgpuStore(std::string root) : root_(std::move(root)) {}

  static Status ValidateName(const std::string& name);
  std::string DirOf(const std::string& name) const { return root_ + "/vgpus/" + name; }
  // The other way: the state root that vGPU directory `vgpu_dir` is in.
  static std::string RootOf(const std::string& vgpu_dir);
  const std::string& root() const { return root_; }
  // vGPUs made from now on hand out sealed state through `publisher`
  // (outlives the store and its copies); null: files, as standalone.
  void set_state_publisher(StatePublisher* publisher) { publisher_ = publisher; }

  // Creates the vGPU, or joins it if it exists. When joining and
  // `spec_is_explicit`, the existing devices and limits must match `spec`.
  // Returns the vGPU directory.
  StatusOr<std::string> CreateOrJoin(const VgpuSpec& spec, bool spec_is_explicit, bool* created);

  // Holds a shared lock on the vGPU's members file until the returned
  // descriptor is closed (or the holder dies). Returns the descriptor.
  StatusOr<int> HoldMembership(const std::string& name);

  // Removes the vGPU if no member holds it and no live process uses it.
  // Returns true when it was removed. A vGPU whose state cannot be read
  // (corrupt) cannot be told unused, so it is kept unless `force`.
  StatusOr<bool> RemoveIfUnused(const std::string& name, bool force = false);

  std::vector<std::string> List() const;

  // Creates the state directory (owner-only) and its vgpus/ if missing.
  Status EnsureRoot() const;

 private:
  Status PublishSealed(const std::string& name, const std::string& tmp, const std::string& dir, const Ledger& ledger,
                       const Limits& limits);
  std::string root_;
  StatePublisher* publisher_ = nullptr;
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_VGPU_STORE_H_
