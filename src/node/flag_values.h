// cli_flags.h — parsing the values users type for vGPU settings, shared by
// `gpuslice set` and the daemon path of `gpuslice run`.
//
// Each error is one line naming the flag, what was typed and how to write
// it. Pure functions; thread-safe; allocate only for errors.
#ifndef GPUSLICE_NODE_FLAG_VALUES_H_
#define GPUSLICE_NODE_FLAG_VALUES_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/vgpu_layout.h"

namespace gpuslice::node {

// A whole percentage, 1..100.
StatusOr<uint32_t> ParsePercentFlag(const std::string& flag, const std::string& text);
// "be" / "best_effort", "lc" / "latency_critical".
StatusOr<core::Priority> ParsePriorityFlag(const std::string& flag, const std::string& text);
// A byte size, or "unlimited" (core::kUnlimited).
StatusOr<uint64_t> ParseMemoryFlag(const std::string& flag, const std::string& text);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_FLAG_VALUES_H_
