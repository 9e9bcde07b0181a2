// control_socket.h — the unix socket the control API listens on: making its
// path ready, and making it owner-only (plus a configured group).
//
// A socket file left by a daemon that died (`kill -9`) is stale: nothing
// accepts on it. One on which something accepts belongs to a live daemon,
// and a second daemon refuses to start rather than steal it.
//
// Called from the daemon's main thread at start and stop. Blocks for at most
// one connect(2) to a local socket; allocates.
#ifndef GPUSLICE_DAEMON_CONTROL_SOCKET_H_
#define GPUSLICE_DAEMON_CONTROL_SOCKET_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "core/status.h"

namespace gpuslice::daemon {

// Checks the path's length, creates its directory (0755) if missing, and
// removes a stale socket. Refuses a path a live daemon answers on, and one
// that is not a socket.
Status PrepareSocketPath(const std::string& path);

// Owner-only (0600), or 0660 and owned by `group`.
Status RestrictSocket(const std::string& path, std::optional<gid_t> group);

// A group name (or numeric id) to its id; the error names the fix.
StatusOr<gid_t> LookupGroup(const std::string& name);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_CONTROL_SOCKET_H_
