// state_publisher.h — where a vGPU store puts the shared memory of the vGPUs
// it makes, when they are not to be files (core/state_handout.h).
//
// The daemon gives its store one (node/state_keeper_client.h): each new
// vGPU's ledger is then a sealed memfd, and the publisher makes sure the
// vGPU's GPUs have sealed boards and that a keeper serves all of them on the
// vGPU's socket. Standalone `gpuslice run` gives none and keeps files: one
// user's own processes have no boundary between them (docs/design.md,
// "Threat model").
//
// Called by VgpuStore under its store lock, from any thread; may block for
// a round trip to the keeper.
#ifndef GPUSLICE_CORE_STATE_PUBLISHER_H_
#define GPUSLICE_CORE_STATE_PUBLISHER_H_

#include <string>
#include <vector>

#include "core/state_handout.h"
#include "core/status.h"

namespace gpuslice::core {

class StatePublisher {
 public:
  virtual ~StatePublisher() = default;
  // Serves vGPU `name`: `listen_fd` is its socket, already bound at
  // `socket_path` (the caller keeps its copy and closes it), `ledger_fd` its
  // sealed ledger, and `gpus` the GPUs whose boards it is handed.
  virtual Status Publish(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                         const std::vector<GpuUuid>& gpus) = 0;
  // The vGPU is gone: stop serving it and drop its ledger.
  virtual void Withdraw(const std::string& name) = 0;
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_STATE_PUBLISHER_H_
