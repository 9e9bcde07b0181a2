// commands.h — how each `gpuslice` command attaches itself to the command line.
//
// main.cc builds the CLI11 app and calls every Add*Command below; each adds
// its subcommand, parses into its own options, and runs through the callback
// it registers. A command's code lives in its own file (run_command.cc, ...);
// modules outside src/cli (src/daemon, src/k8s) provide their Add function
// from their own folder.
//
// Called from main() only.
#ifndef GPUSLICE_CLI_COMMANDS_H_
#define GPUSLICE_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace gpuslice::cli {

// The exit code the chosen command returned; main() returns it.
int& ExitCode();

void AddRunCommand(CLI::App& app);
void AddDaemonCommand(CLI::App& app);   // daemon_command.cc
void AddLsCommand(CLI::App& app);       // ls_command.cc
void AddTopCommand(CLI::App& app);      // top_command.cc
void AddSetCommand(CLI::App& app);      // set_command.cc
void AddDevicesCommand(CLI::App& app);  // devices_command.cc

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_COMMANDS_H_
