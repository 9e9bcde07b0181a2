// `gpuslice state-keeper`: the process that keeps the daemon's vGPUs' sealed
// shared memory (src/node/state_keeper.h). The daemon starts it; it is
// not meant to be run by hand, so it is hidden from --help.
#include <unistd.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "node/state_keeper.h"

namespace gpuslice::cli {

void AddStateKeeperCommand(CLI::App& app) {
  struct Flags {
    std::string state_dir;
    int ready_fd = -1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("state-keeper", "Hold the daemon's vGPUs' sealed state (started by the daemon)");
  cmd->group("");  // hidden
  cmd->add_option("--state-dir", f->state_dir, "State directory")->required();
  cmd->add_option("--ready-fd", f->ready_fd, "Descriptor to write one byte to once serving; detaches when given");
  cmd->callback([f] {
    // Nothing of the starting daemon but stdio and the readiness pipe.
    close_range(f->ready_fd == 3 ? 4 : 3, ~0u, 0);
    ExitCode() = node::RunStateKeeper(f->state_dir, f->ready_fd);
  });
}

}  // namespace gpuslice::cli
