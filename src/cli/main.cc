// gpuslice — the command line. This file only wires commands to the app;
// each command lives in its own file and adds itself (commands.h).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "k8s/commands.h"

namespace gpuslice::cli {
int& ExitCode() {
  static int code = 0;
  return code;
}
}  // namespace gpuslice::cli

int main(int argc, char** argv) {
  CLI::App app{"gpuslice: share one NVIDIA GPU among processes with hard memory limits"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all");

  gpuslice::cli::AddRunCommand(app);
  gpuslice::cli::AddDaemonCommand(app);
  gpuslice::cli::AddLsCommand(app);
  gpuslice::cli::AddTopCommand(app);
  gpuslice::cli::AddSetCommand(app);
  gpuslice::cli::AddSuspendCommands(app);
  gpuslice::cli::AddDevicesCommand(app);
  gpuslice::cli::AddStateKeeperCommand(app);
  // Commands of later modules are added here, one line each.
  gpuslice::k8s::AddCommands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where;
    for (const CLI::App* sub : app.get_subcommands()) where += sub->get_name() + " ";
    std::cerr << "gpuslice: " << e.what() << "; see gpuslice " << where << "--help\n";
    return 2;
  }
  return gpuslice::cli::ExitCode();
}
