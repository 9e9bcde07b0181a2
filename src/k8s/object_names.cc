#include "k8s/object_names.h"

#include <string>

namespace gpuslice::k8s {
namespace {

bool Alphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsLabel(std::string_view part) {
  if (part.empty() || part.size() > 63 || !Alphanumeric(part.front()) || !Alphanumeric(part.back())) return false;
  for (char c : part) {
    if (!Alphanumeric(c) && c != '-') return false;
  }
  return true;
}

// The value as it can be shown: printable, and not so long as to flood a log.
std::string Shown(std::string_view name) {
  std::string shown;
  for (char c : name.substr(0, 80)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (name.size() > 80) shown += "...";
  return shown;
}

}  // namespace

Status CheckSubdomainName(std::string_view what, std::string_view name) {
  bool ok = !name.empty() && name.size() <= 253;
  for (std::string_view rest = name; ok;) {
    const size_t dot = rest.find('.');
    ok = IsLabel(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  if (ok) return Status::Ok();
  return Status::Error(std::string(what) + " \"" + Shown(name) +
                       "\" is not a Kubernetes object name: at most 253 characters of lowercase letters, digits, "
                       "'-' and '.', each dot-separated part starting and ending with a letter or digit");
}

Status CheckLabelName(std::string_view what, std::string_view name) {
  if (IsLabel(name)) return Status::Ok();
  return Status::Error(std::string(what) + " \"" + Shown(name) +
                       "\" is not a Kubernetes namespace name: at most 63 characters of lowercase letters, digits "
                       "and '-', starting and ending with a letter or digit");
}

}  // namespace gpuslice::k8s
