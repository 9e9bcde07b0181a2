#include "config/listen_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <string>

#include "config/quote.h"

namespace gpuslice::config {
namespace {

Status Bad(std::string_view text, std::string_view why) {
  return Status::Error(Quote(text) + " " + std::string(why) + "; want host:port, e.g. 127.0.0.1:9400 or [::1]:9400");
}

bool IsHostName(std::string_view host) {
  // RFC 1123 letters, digits, '-' and '.'; what a resolver would accept.
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return !host.empty() && host.size() <= 253;
}

}  // namespace

StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  ListenAddress out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(text, "has no closing ']'");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return Bad(text, "has no port");
    port_text = text.substr(close + 2);
    in6_addr v6;
    if (inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) return Bad(text, "has a bad IPv6 address");
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return Bad(text, "has no port");
    out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) return Bad(text, "is an IPv6 address without brackets");
    if (!IsHostName(out.host)) return Bad(text, "has a bad host");
  }
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return Bad(text, "has a bad port (0-65535)");
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace gpuslice::config
