// vgpu_owner.h — who owns a vGPU, and who may change it.
//
// A daemon opened to a group (`socket.group`) serves several users on one
// socket. Each vGPU it makes records its creator's uid, as the kernel gave
// it on the control socket (daemon/control_listener.h), in the file `owner`
// of the vGPU's directory, which only the daemon's user can write. Then:
//   - the owner, root and the daemon's own user may resize, suspend,
//     resume, migrate and delete it, and join it with `gpuslice run --name`;
//   - any other caller is refused (PERMISSION_DENIED naming the owner);
//   - a vGPU with no owner file (made before owners were recorded, or by
//     hand) is changed by root and the daemon's user only;
//   - commands run in-process (standalone, no daemon) pass no caller: the
//     state directory's permissions already limit them to its owner.
// The same owner is given the vGPU's ledger, members lock and state socket
// in group mode, so that other members cannot open them
// (VgpuManager::ApplyGroupPermissions, StateKeeperClient).
//
// Thread-compatible free functions; LoadOwner and StoreOwner make syscalls.
#ifndef GPUSLICE_NODE_VGPU_OWNER_H_
#define GPUSLICE_NODE_VGPU_OWNER_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "core/status.h"

namespace gpuslice::node {

inline constexpr char kOwnerFile[] = "owner";

// The uid in `vgpu_dir`/owner; nullopt when the file is missing or does not
// hold one uid.
std::optional<uid_t> LoadOwner(const std::string& vgpu_dir);
// Writes the file (0444), replacing any.
Status StoreOwner(const std::string& vgpu_dir, uid_t owner);

// Whether `caller` (nullopt: in-process, an operator) may change a vGPU
// owned by `owner` on a node whose daemon runs as `operator_uid`.
bool MayChange(std::optional<uid_t> caller, std::optional<uid_t> owner, uid_t operator_uid);

// Group mode: how a vGPU's ledger, members lock and state socket are
// shared. Owned by `owner` (-1: left as they are) with `mode`: the owner's
// alone (0600) where this process is that owner or root; the group's
// (0660) where it cannot give files away, or the vGPU records no owner.
struct GroupGrant {
  uid_t uid;
  mode_t mode;
  bool owners_alone() const { return mode == 0600; }
};
GroupGrant GrantInGroupMode(std::optional<uid_t> owner);

// "uid 1001 (alice)", or "uid 1001" where the name cannot be found.
std::string DescribeUid(uid_t uid);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_VGPU_OWNER_H_
