// quantity.h — Kubernetes resource quantities ("4Gi", "30", "512M",
// "1500m") as whole numbers, for the DRA driver's capacities.
//
// Only whole values are accepted: a capacity of a vGPU is never fractional
// (cores) or sub-byte (memory). Pure functions; thread-safe.
#ifndef GPUSLICE_K8S_DRA_QUANTITY_H_
#define GPUSLICE_K8S_DRA_QUANTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::k8s::dra {

// Parses a quantity that is a non-negative whole number: digits, then an
// optional suffix (Ki Mi Gi Ti Pi Ei, k M G T P E, or m when the value stays
// whole, as "2000m" = 2). `field` names it in the error.
StatusOr<uint64_t> ParseWholeQuantity(std::string_view text, const std::string& field);

// The shortest exact form: "4Gi" for 4 GiB, "256Mi", "100", "12345".
std::string FormatQuantity(uint64_t value);

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_QUANTITY_H_
