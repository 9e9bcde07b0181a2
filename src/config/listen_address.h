// listen_address.h — parsing "host:port" listen addresses and telling
// loopback from the rest, for the metrics endpoint (config validation and the
// HTTP server share it, so both refuse the same addresses).
//
// Accepted: "127.0.0.1:9400", "localhost:9400", "[::1]:9400", "0.0.0.0:9400",
// "[::]:9400", "host.example:9400". Port 0..65535 (0: any free port).
// Pure functions; thread-safe; allocate.
#ifndef GPUSLICE_CONFIG_LISTEN_ADDRESS_H_
#define GPUSLICE_CONFIG_LISTEN_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::config {

struct ListenAddress {
  std::string host;  // without IPv6 brackets: "::1"
  uint16_t port = 0;
};

// The error names what is wrong and how to write it ("want host:port, e.g.
// 127.0.0.1:9400").
StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

// True for 127.0.0.0/8, ::1 and "localhost". Everything else (0.0.0.0, ::,
// other names) may reach other hosts.
bool IsLoopbackHost(std::string_view host);

}  // namespace gpuslice::config

#endif  // GPUSLICE_CONFIG_LISTEN_ADDRESS_H_
