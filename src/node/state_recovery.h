// state_recovery.h — finds a vGPU's sealed shared memory again in the
// processes that map it, when nobody else holds it any more.
//
// The state keeper (state_keeper.h) holds every handed-out ledger and board,
// and its client (the daemon, or a Kubernetes plugin) holds a copy. When
// both are gone at once (a DaemonSet rollout restarts the plugin and the
// keeper together; both killed), the memory lives on only in the running
// applications' mappings. Made anew, a vGPU would have two ledgers: its
// running processes charging the old one, its new ones the new. So the
// client writes, beside each vGPU's socket, a record of what it handed out:
// the identity (device and inode) of the ledger and of each GPU's board,
// in the vGPU's directory, which no tenant can write. A new client finds a
// process whose /proc/<pid>/maps shows a mapping of exactly that inode,
// opens the memory through /proc/<pid>/map_files (CAP_SYS_ADMIN, which the
// daemon and the privileged plugin have), checks it is still sealed and of
// its layout's size, and serves it again.
//
// Why a tenant cannot plant memory: a mapping is taken only if its inode is
// the recorded one, and an inode identifies one live object; a memfd a
// tenant makes, whatever its name, size or seals, has another.
//
// Why a ledger nobody maps is not replaced by a fresh one: a tenant can hold
// the memfd unmapped (a descriptor, or a message parked in a unix socket,
// which no /proc scan sees) and map it later, and its processes would then
// charge a ledger nobody else sees. Such a vGPU stays refused.
//
// Record format (text, one item per line):
//   gpuslice-state-record 1
//   ledger <dev> <ino>
//   board <gpu uuid hex> <dev> <ino>     one per GPU of the vGPU
//
// Slow path only (start of the daemon or plugin). Functions allocate and
// make syscalls; thread-safe.
#ifndef GPUSLICE_NODE_STATE_RECOVERY_H_
#define GPUSLICE_NODE_STATE_RECOVERY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/state_handout.h"
#include "core/status.h"
#include "port/unique_fd.h"

namespace gpuslice::node {

inline constexpr char kStateRecordFileName[] = "state.record";

// One region's identity: what fstat says of it and /proc/<pid>/maps shows.
struct MemoryId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const MemoryId&) const = default;
};

struct StateRecord {
  MemoryId ledger;
  std::vector<std::pair<core::GpuUuid, MemoryId>> boards;
};

StatusOr<MemoryId> IdentityOf(int fd);
std::string FormatStateRecord(const StateRecord& record);
StatusOr<StateRecord> ParseStateRecord(const std::string& text);

// Writes <vgpu_dir>/state.record (0444, by rename).
Status WriteStateRecord(const std::string& vgpu_dir, const StateRecord& record);
StatusOr<StateRecord> ReadStateRecord(const std::string& vgpu_dir);

// Opens the memory `id` of exactly `size` bytes through a process under
// `proc_root` that maps it, checked sealed (port::CheckSealed) and to be
// that very inode. `what` names it in errors.
StatusOr<port::UniqueFd> OpenMappedMemory(const std::string& proc_root, const MemoryId& id, size_t size,
                                          const std::string& what);

// The same for many regions in one pass over the processes (each reads
// every process's maps once, however many vGPUs were lost): one result per
// entry of `wanted`, in its order.
struct WantedMemory {
  MemoryId id;
  size_t size = 0;
  std::string what;
};
std::vector<StatusOr<port::UniqueFd>> OpenMappedMemories(const std::string& proc_root,
                                                         const std::vector<WantedMemory>& wanted);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_STATE_RECOVERY_H_
