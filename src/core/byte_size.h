// byte_size.h — parsing and printing memory sizes as users write them.
//
// Accepts an integer or decimal number with an optional unit: B, KiB, MiB,
// GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), and the
// shorthands K, M, G, T (powers of 1024, as Kubernetes' Ki/Mi/Gi are).
// Case-insensitive units, no spaces inside. Pure functions; thread-safe.
#ifndef GPUSLICE_CORE_BYTE_SIZE_H_
#define GPUSLICE_CORE_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::core {

StatusOr<uint64_t> ParseByteSize(std::string_view text);
// "4 GiB", "1.5 GiB", "512 MiB", "100 B": the shortest exact-enough form.
std::string FormatByteSize(uint64_t bytes);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_BYTE_SIZE_H_
