// cli_output.h — how the commands print: their one-line errors (Fail), and
// the listing commands' human tables and stable --json shapes (documented in
// docs/operations.md).
//
// JSON keys are snake_case, sizes are bytes, ratios 0..1, and an unlimited
// memory limit is null. Called from the CLI's main thread; pure functions
// that allocate.
#ifndef GPUSLICE_CLI_CLI_OUTPUT_H_
#define GPUSLICE_CLI_CLI_OUTPUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuslice/control.pb.h"

namespace gpuslice::cli {

using Json = nlohmann::ordered_json;

// The exit code of a command that failed for a reason of gpuslice's own
// (bad flags, no daemon, a refused change), apart from the command's status.
inline constexpr int kGpusliceError = 2;

// Prints `message` to stderr as one line, "gpuslice: MESSAGE" (or
// "gpuslice WHO: MESSAGE"), and returns kGpusliceError, so that a command
// fails with `return Fail(...)`.
int Fail(const std::string& message);
int Fail(const std::string& who, const std::string& message);

Json DevicesJson(const control::v1::GetDevicesResponse& devices);
Json VgpuJson(const control::v1::Vgpu& vgpu);

std::string DevicesTable(const control::v1::GetDevicesResponse& devices);
// One row per vGPU and GPU, then its processes.
// A device's SLICE column: the slice applied by its processes, with the
// policy's in parentheses where it differs or nothing is applied yet.
std::string SliceText(const control::v1::VgpuDevice& d);
// " (suspended)", " (suspending)", " (resuming)"; "" for a running vGPU: after its name in ls and top.
std::string SuspendSuffix(const control::v1::Vgpu& v);
std::string VgpuTable(const std::vector<control::v1::Vgpu>& vgpus, const control::v1::GetDevicesResponse& devices);

// "4 GiB", or "unlimited".
std::string LimitText(const control::v1::VgpuDevice& device);
std::string PriorityText(control::v1::Priority priority);  // "be" / "lc"
// The vGPU's class ("be" / "lc") when it is at its class's lowest level,
// else its level's name ("critical"): the PRIORITY column.
std::string PriorityText(const control::v1::Vgpu& v);
// "212 W", "87.5 W"; "-" when absent.
std::string WattsText(double watts, bool present = true);
// The MEASURED column: the share of GPU time over the last few seconds of
// measured GPU time (the daemon's meter), else NVML's last window.
std::string MeasuredText(const control::v1::VgpuDevice& d);
// The COMPUTE/SHARE column: "30% cap 50%", with "pwr 150W" under a power
// cap (and the budget in force when it is tighter than the cap).
std::string ComputeText(const control::v1::Vgpu& v, const control::v1::VgpuDevice& d);
// "ok", or "XID 79 ..." for an unhealthy GPU: the HEALTH column.
std::string HealthText(const control::v1::Gpu& g);
// "37%", or "-" when absent.
std::string RatioText(bool present, double ratio);
// A latency: "313us", "1.45ms", "250ms", "1.00s"; "-" when absent.
std::string LatencyText(bool present, double seconds);

// Left-aligned columns, two spaces apart.
std::string FormatColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_CLI_OUTPUT_H_
