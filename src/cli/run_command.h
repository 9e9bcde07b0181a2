// run_command.h — `gpuslice run`: create or join a vGPU and run a command in it.
//
// Standalone (no daemon): the vGPU lives in the state directory
// (core/vgpu_store.h); this process holds a membership lock on it while the
// command runs, reaps the ledger of dead processes every 200 ms, and removes
// the vGPU when the last member leaves and no process uses it.
//
// Called from main() only; blocks until the command exits.
#ifndef GPUSLICE_CLI_RUN_COMMAND_H_
#define GPUSLICE_CLI_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace gpuslice::cli {

enum class InjectMode { kPreload, kLibraryPath };

struct RunOptions {
  std::string memory;          // "" = no memory limit
  std::vector<std::string> gpus;  // indices or UUIDs; empty = every GPU
  std::string name;            // "" = a new vGPU of its own
  InjectMode inject = InjectMode::kPreload;
  std::string state_dir;       // "" = VgpuStore::DefaultRoot()
  // Compute (issue 3), as typed, validated by RunCommand: "" = not given.
  std::string compute;         // --compute N: proportional share, percent 1..100
  std::string compute_cap;     // --compute-cap N: hard ceiling, percent 1..100
  std::string priority;        // --priority lc|be
  std::string power_cap;       // --power-cap WATTS (issue 15): per GPU, held by the daemon
  bool suspendable = false;    // --suspendable: the daemon may suspend it for higher levels' memory
  std::string audit = "kill";  // --audit report|deny|kill|off (cli/session_audit.h)
  std::vector<std::string> command;
};

// Returns the process exit code: the command's, or 2 for a gpuslice error
// (after printing one line naming the problem and its fix to stderr).
int RunCommand(const RunOptions& options);

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_RUN_COMMAND_H_
