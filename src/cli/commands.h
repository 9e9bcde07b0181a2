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

#include <initializer_list>
#include <string>

namespace gpuslice::cli {

// The exit code the chosen command returned; main() returns it.
int& ExitCode();

// The first of `flags` given on `cmd` with an empty value (`--memory ""`),
// or "". A command refuses it rather than read it as "not given": an empty
// --memory must not make an unlimited vGPU.
inline std::string FlagGivenEmpty(CLI::App& cmd, std::initializer_list<const char*> flags) {
  for (const char* flag : flags) {
    const CLI::Option* option = cmd.get_option_no_throw(flag);
    if (option == nullptr || option->count() == 0) continue;
    for (const std::string& value : option->results()) {
      if (value.empty()) return flag;
    }
  }
  return "";
}
// FlagGivenEmpty's one-line error.
inline std::string EmptyFlagMessage(const std::string& flag) {
  return flag + " was given an empty value; give a value (see --help) or leave " + flag + " out";
}

void AddRunCommand(CLI::App& app);
void AddDaemonCommand(CLI::App& app);   // daemon_command.cc
void AddLsCommand(CLI::App& app);       // ls_command.cc
void AddTopCommand(CLI::App& app);      // top_command.cc
void AddSetCommand(CLI::App& app);      // set_command.cc
void AddDevicesCommand(CLI::App& app);  // devices_command.cc
void AddSuspendCommands(CLI::App& app);     // suspend_command.cc: suspend, resume and migrate
void AddStateKeeperCommand(CLI::App& app);  // state_keeper_command.cc (hidden; the daemon runs it)

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_COMMANDS_H_
