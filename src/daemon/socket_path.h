// socket_path.h — where the control socket is, agreed by daemon and CLI.
//
// $GPUSLICE_SOCKET if set, else gpuslice.sock inside the state directory
// (/run/gpuslice/gpuslice.sock by default). Tying the default to the state
// directory means a daemon and a `gpuslice run` that share a state directory
// find each other, and ones that do not (tests, two users) never meet.
//
// Pure apart from reading the environment; thread-safe.
#ifndef GPUSLICE_DAEMON_SOCKET_PATH_H_
#define GPUSLICE_DAEMON_SOCKET_PATH_H_

#include <string>

namespace gpuslice::daemon {

inline constexpr char kSocketFileName[] = "gpuslice.sock";

// `state_dir`: the state directory in use ("" = VgpuStore::DefaultRoot()).
std::string DefaultSocketPath(const std::string& state_dir);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_SOCKET_PATH_H_
