// busy_split.h — one GPU's busy time in an interval, divided between the
// vGPUs that ran in it, from two signals that are each wrong alone.
//
//   - NVML's per-process samples are the only signal a tenant cannot touch,
//     and exact for a process alone on its GPU. Between processes that share
//     a GPU by time-slicing they overlap: each counts the periods in which
//     its context ran at some point, and three trainings at 20/30/50 sampled
//     47/51/49% of a GPU busy 99% of the time (docs/benchmarks.md, "NVML's
//     raw samples").
//   - The boards' turns and busy marks say which vGPU the GPU was running
//     while paced vGPUs shared it (board_sampler.h): exact in which vGPU,
//     blind to time the boards do not pace (latency-critical and unpaced
//     processes, processes of no vGPU).
//
// The rule: the GPU's busy time (NVML's device samples) is the total. With no
// board attribution (a vGPU alone, or none paced) the samples say who ran,
// scaled to that total: alone, they read 0.90-1.01 of it on an H100. Where
// the boards attributed time, it is the vGPUs' own, scaled down if it adds up
// to more than the GPU was busy. What is left of the busy time goes to each
// vGPU (and "", processes of no vGPU) in proportion to what its samples
// claim beyond what the boards gave it: the part of its sampled time the
// boards did not explain. So the parts add up to the busy time, and a vGPU
// whose marks say it ran less than its samples show takes back the
// difference first.
//
// What this trusts: the boards are written by every vGPU on the GPU
// (docs/design.md, "Threat model: shared state"), so a tenant that rewrites
// turns and busy marks moves GPU time between vGPUs of its GPU; the GPU's
// total stays NVML's.
//
// Pure; thread-compatible.
#ifndef GPUSLICE_DAEMON_BUSY_SPLIT_H_
#define GPUSLICE_DAEMON_BUSY_SPLIT_H_

#include <map>
#include <string>

namespace gpuslice::daemon {

// GPU-seconds per vGPU ("" = processes of no vGPU): `busy_s` divided as
// above, from the boards' attribution `board_s` and the integrated samples
// `sampled_s`. With nothing attributed and nothing sampled, nothing.
std::map<std::string, double> SplitBusyTime(double busy_s, const std::map<std::string, double>& board_s,
                                            const std::map<std::string, double>& sampled_s);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_BUSY_SPLIT_H_
