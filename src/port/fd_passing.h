// fd_passing.h — sending descriptors over a unix socket (SCM_RIGHTS).
//
// One message is a short text and up to kMaxFds descriptors, sent and
// received whole by one sendmsg/recvmsg on a SOCK_STREAM socket (the
// kernel keeps the descriptors with the first byte of the text, and the
// texts here are far smaller than a socket buffer).
//
// Slow paths only (attach, create, the state keeper). Thread-safe; blocks
// at most `timeout_ms` in ReceiveWithFds.
#ifndef GPUSLICE_PORT_FD_PASSING_H_
#define GPUSLICE_PORT_FD_PASSING_H_

#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::port {

inline constexpr int kMaxFds = 64;
inline constexpr size_t kMaxMessage = 4096;

// Sends `text` with `fds` (the caller keeps its own copies). Never blocks
// longer than a full socket buffer would make it.
Status SendWithFds(int socket, const std::string& text, const std::vector<int>& fds);

// Receives one message into `text` and the descriptors that came with it
// (close-on-exec; the caller owns them). Fails after `timeout_ms` without a
// message, or when the peer closed first.
Status ReceiveWithFds(int socket, int timeout_ms, std::string* text, std::vector<int>* fds);

// A connected SOCK_STREAM socket to the unix socket at `path`, close-on-exec.
StatusOr<int> ConnectUnix(const std::string& path);
// True when something accepts connections at `path` (a dead process's
// socket file does not): whether another instance is serving there.
bool UnixSocketAnswers(const std::string& path);

// A listening unix socket bound at `path` and given mode `mode` (an existing
// socket file there is replaced). Bind it in a directory no one else can
// enter yet: between bind and chmod it has the process's umask. Close-on-exec.
StatusOr<int> ListenUnix(const std::string& path, unsigned mode);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_FD_PASSING_H_
