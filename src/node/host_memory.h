// host_memory.h — how much host memory the node has free for a suspend's
// checkpoints: MemAvailable from /proc/meminfo (the kernel's estimate of
// what can be allocated without swapping).
//
// A seam: VgpuManager takes a function, so tests give any number; the
// daemon gives ReadMemAvailable on the path below. Thread-safe.
#ifndef GPUSLICE_NODE_HOST_MEMORY_H_
#define GPUSLICE_NODE_HOST_MEMORY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace gpuslice::node {

// Bytes available, or nullopt when unknown.
using HostMemoryProbe = std::function<std::optional<uint64_t>()>;

// MemAvailable of a /proc/meminfo text, in bytes.
std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo);

// Reads `path` (normally /proc/meminfo).
std::optional<uint64_t> ReadMemAvailable(const std::string& path);

// /proc/meminfo, or $GPUSLICE_MEMINFO where set (the daemon tests point it
// at a file of their own, to make a suspend that would not fit).
std::string MeminfoPath();

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_HOST_MEMORY_H_
