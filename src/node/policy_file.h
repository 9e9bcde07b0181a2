// policy_file.h — the node's scheduling policy (the daemon config's
// `timeslices`) and its priority levels (the config's `levels`), stored in
// the state directory.
//
// Why: a `gpuslice set` or `run` made while no daemon answers recomputes
// every vGPU's slices on the node. With the daemon's constants in the state
// directory, it computes the same slices the daemon would, instead of
// silently rewriting them with the built-in defaults. The daemon stores its
// config at start; every standalone writer loads it (StandaloneNode).
//
// The file is `<state root>/policy`, one `key value` line per constant,
// written whole (temporary file + rename), mode 0644: no secret, and group
// members' standalone commands must read it. Unknown keys are refused, so a
// newer daemon's file is not half-read by an older CLI.
//
// The levels are `<state root>/levels.yaml`, the config's `levels:` list as
// YAML, or absent for the default levels (task/task_levels.h). Every
// `--priority NAME` on the node resolves through them, so a standalone `run`
// and the daemon give a name the same level word.
//
// The daemon's memory-overcommit wait (`memory_pressure.wait_ms`) is
// `<state root>/memory_wait_ms`, so that vGPUs the Kubernetes plugins make
// on a node where the daemon serves overcommit wait as the daemon's own do
// (core::VgpuSpec::memory_wait_ms).
//
// Thread-compatible free functions; make syscalls; allocate.
#ifndef GPUSLICE_NODE_POLICY_FILE_H_
#define GPUSLICE_NODE_POLICY_FILE_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "policy/timeslice_policy.h"
#include "task/task_levels.h"

namespace gpuslice::node {

inline constexpr char kPolicyFileName[] = "policy";
inline constexpr char kLevelsFileName[] = "levels.yaml";

// Writes `config` to `<state_root>/policy`, replacing what was there.
Status StorePolicyConfig(const std::string& state_root, const policy::TimeslicePolicyConfig& config);

// The stored config, or the built-in defaults when none was ever stored.
// A file that cannot be read or parsed is an error naming the file and fix.
StatusOr<policy::TimeslicePolicyConfig> LoadPolicyConfig(const std::string& state_root);

// Writes the `levels:` document (DaemonConfig::levels_yaml); "" removes the
// file, so the node falls back to the default levels.
Status StoreLevels(const std::string& state_root, const std::string& levels_yaml);

// The stored levels, or the default levels when none are stored. A file
// that cannot be read or parsed is an error naming the file and the fix.
StatusOr<task::LevelTable> LoadLevels(const std::string& state_root);

inline constexpr char kMemoryWaitFileName[] = "memory_wait_ms";
// Writes the wait; 0 removes the file (overcommit off).
Status StoreMemoryWait(const std::string& state_root, uint32_t wait_ms);
// The stored wait, 0 when none is stored; a file that cannot be parsed is
// an error naming the file and the fix.
StatusOr<uint32_t> LoadMemoryWait(const std::string& state_root);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_POLICY_FILE_H_
