// object_names.h — Kubernetes object names, checked before they go into an
// API path or query.
//
// A name is a path segment of the request gpuslice sends with its service
// account's token: one holding '/' or ".." reaches another object
// ("p/../../../kube-system/..." as a pod name reached the API server from
// the scheduler extender's bind). So every name is checked against
// Kubernetes' own rules first (docs/kubernetes.md, "Names"):
//   - a DNS-1123 subdomain (pods, nodes, resource claims and slices): at most
//     253 characters; dot-separated parts of lowercase letters, digits and
//     '-', each starting and ending with a letter or digit;
//   - a DNS-1123 label (namespaces): one such part, at most 63 characters.
//
// Pure functions; any thread.
#ifndef GPUSLICE_K8S_OBJECT_NAMES_H_
#define GPUSLICE_K8S_OBJECT_NAMES_H_

#include <string_view>

#include "core/status.h"

namespace gpuslice::k8s {

// OK, or an error naming `what` (e.g. "pod name"), the value and the rule.
Status CheckSubdomainName(std::string_view what, std::string_view name);
Status CheckLabelName(std::string_view what, std::string_view name);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_OBJECT_NAMES_H_
