#include "k8s/json_fields.h"

#include <strings.h>

namespace gpuslice::k8s {

using nlohmann::json;

const json* JsonFields::FindKey(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto exact = object.find(std::string(key));
  if (exact != object.end()) return &*exact;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key().size() == key.size() && strncasecmp(it.key().data(), key.data(), key.size()) == 0) return &*it;
  }
  return nullptr;
}

std::string JsonFields::Path(std::string_view key) const {
  return where_.empty() ? std::string(key) : where_ + "." + std::string(key);
}

Status JsonFields::RequiredString(std::string_view key, std::string* out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Error(Path(key) + " is missing");
  return OptionalString(key, out);
}

Status JsonFields::OptionalString(std::string_view key, std::string* out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_string()) return Status::Error(Path(key) + " must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonFields::RequiredUint(std::string_view key, uint64_t* out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Error(Path(key) + " is missing");
  return OptionalUint(key, out);
}

Status JsonFields::OptionalUint(std::string_view key, uint64_t* out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return Status::Ok();
  }
  if (v->is_number_integer()) return Status::Error(Path(key) + " must not be negative");
  return Status::Error(Path(key) + " must be a whole number");
}

Status JsonFields::OptionalBool(std::string_view key, bool* out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_boolean()) return Status::Error(Path(key) + " must be true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonFields::RequiredArray(std::string_view key, const json** out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Error(Path(key) + " is missing");
  return OptionalArray(key, out);
}

Status JsonFields::OptionalArray(std::string_view key, const json** out) const {
  *out = nullptr;
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_array()) return Status::Error(Path(key) + " must be an array");
  *out = v;
  return Status::Ok();
}

Status JsonFields::RequiredObject(std::string_view key, const json** out) const {
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Error(Path(key) + " is missing");
  return OptionalObject(key, out);
}

Status JsonFields::OptionalObject(std::string_view key, const json** out) const {
  *out = nullptr;
  const json* v = FindKey(object_, key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_object()) return Status::Error(Path(key) + " must be an object");
  *out = v;
  return Status::Ok();
}

}  // namespace gpuslice::k8s
