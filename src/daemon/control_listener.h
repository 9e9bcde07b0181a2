// control_listener.h — the control socket's accept loop, which knows who is
// calling.
//
// gRPC's own unix-socket listener does not tell a handler which user
// connected. A daemon opened to a group (`socket.group`) serves several
// users on one socket, and must know which of them asks to change a vGPU
// (node/vgpu_owner.h). So the daemon accepts connections itself: for each it
// reads the peer's credentials (SO_PEERCRED, which the kernel fills in at
// connect; the client cannot choose them), records them under the
// connection's descriptor, and hands the descriptor to gRPC
// (grpc::AddInsecureChannelFromFd), which names that connection's peer
// "fd:N". A handler asks CallerOf(its context).
//
// Why a descriptor number names one connection for as long as a handler
// runs: gRPC closes a connection's descriptor only when its transport is
// destroyed, and every call in progress holds a reference to the
// transport. A number is reused only after that close, and the new
// connection's credentials replace the old ones here before gRPC sees it.
//
// Thread-safety: Start and Stop from one thread; CallerOf from any (gRPC's
// handler threads), under a mutex held for a map lookup. Allocates and makes
// syscalls; not on any hot path.
#ifndef GPUSLICE_DAEMON_CONTROL_LISTENER_H_
#define GPUSLICE_DAEMON_CONTROL_LISTENER_H_

#include <grpcpp/server.h>
#include <grpcpp/server_context.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/status.h"
#include "port/mutex.h"
#include "port/unique_fd.h"

namespace gpuslice::daemon {

class ControlListener {
 public:
  struct Caller {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
  };

  // Binds and listens on `path`, a socket owner-only (0600) from its first
  // instant; the daemon then sets its final mode (control_socket.h).
  static StatusOr<std::unique_ptr<ControlListener>> Listen(const std::string& path);
  ~ControlListener();
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;

  // Hands every connection accepted from now on to `server` (built with no
  // listening port), which must outlive Stop.
  void Start(grpc::Server* server);
  // Accepts no more; connections already handed over stay gRPC's. Call
  // before shutting the server down. Idempotent.
  void Stop();

  // Who made the call: nullopt when its peer is not a connection accepted
  // here (an in-process channel, a test's server).
  std::optional<Caller> CallerOf(const grpc::ServerContext& context) const EXCLUDES(mu_);

  // How many connections were accepted and handed to gRPC.
  uint64_t accepted() const EXCLUDES(mu_);

 private:
  explicit ControlListener(port::UniqueFd listen_fd, port::UniqueFd wake_fd);
  void AcceptLoop(grpc::Server* server);

  port::UniqueFd listen_fd_;
  port::UniqueFd wake_fd_;  // an eventfd that ends the loop
  std::thread thread_;
  mutable port::Mutex mu_;
  std::map<int, Caller> callers_ GUARDED_BY(mu_);  // by descriptor number
  uint64_t accepted_ GUARDED_BY(mu_) = 0;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_CONTROL_LISTENER_H_
