// json_fields.h — typed, non-throwing reads of one JSON object's fields, with
// errors that name the field's path ("gpus[1].uuid must be a string").
//
// Kubernetes and kube-scheduler send JSON produced by Go. Go's decoder
// matches keys to fields case-insensitively, so kube-scheduler's "Pod" and a
// hand-written "pod" mean the same; FindKey does the same here.
//
// A view over a caller-owned nlohmann::json; no copies. Thread-compatible.
#ifndef GPUSLICE_K8S_JSON_FIELDS_H_
#define GPUSLICE_K8S_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::k8s {

class JsonFields {
 public:
  // `object` must be a JSON object and outlive this view.
  JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Status RequiredString(std::string_view key, std::string* out) const;
  Status OptionalString(std::string_view key, std::string* out) const;  // unchanged when absent or null
  Status RequiredUint(std::string_view key, uint64_t* out) const;
  Status OptionalUint(std::string_view key, uint64_t* out) const;
  Status OptionalBool(std::string_view key, bool* out) const;
  Status RequiredArray(std::string_view key, const nlohmann::json** out) const;
  Status OptionalArray(std::string_view key, const nlohmann::json** out) const;  // nullptr when absent or null
  Status RequiredObject(std::string_view key, const nlohmann::json** out) const;
  Status OptionalObject(std::string_view key, const nlohmann::json** out) const;

  // The value of `key` (exact match first, then case-insensitive), or nullptr.
  static const nlohmann::json* FindKey(const nlohmann::json& object, std::string_view key);

 private:
  std::string Path(std::string_view key) const;
  const nlohmann::json& object_;
  std::string where_;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_JSON_FIELDS_H_
