// gpuslice — the command line. This file only wires flags to commands; each
// command lives in its own file.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/run_command.h"

int main(int argc, char** argv) {
  CLI::App app{"gpuslice: share one NVIDIA GPU among processes with hard memory limits"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all");

  gpuslice::cli::RunOptions run;
  std::string inject = "preload";
  CLI::App* run_cmd = app.add_subcommand("run", "Run a command inside a vGPU (created, or joined by --name)");
  run_cmd->add_option("--memory", run.memory, "Device memory limit per GPU, e.g. 4GiB, 512MiB");
  run_cmd->add_option("--gpu", run.gpus, "GPUs by index or UUID (default: all)")->delimiter(',');
  run_cmd->add_option("--name", run.name, "vGPU name; processes run with the same name share one vGPU");
  run_cmd->add_option("--inject", inject, "How the library is loaded: preload (LD_PRELOAD) or libpath "
                                          "(libcuda.so.1 first on LD_LIBRARY_PATH)")
      ->check(CLI::IsMember({"preload", "libpath"}));
  run_cmd->add_option("--state-dir", run.state_dir, "State directory (default: $GPUSLICE_STATE_DIR, "
                                                    "$XDG_RUNTIME_DIR/gpuslice or /run/gpuslice)");
  run_cmd->add_option("command", run.command, "The command and its arguments, after --")->required();
  run_cmd->prefix_command(false);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gpuslice: " << e.what() << "; see gpuslice " << (run_cmd->parsed() ? "run " : "")
              << "--help\n";
    return 2;
  }
  if (run_cmd->parsed()) {
    run.inject = inject == "libpath" ? gpuslice::cli::InjectMode::kLibraryPath : gpuslice::cli::InjectMode::kPreload;
    return gpuslice::cli::RunCommand(run, argv[0]);
  }
  return 2;
}
