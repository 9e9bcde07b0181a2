// yaml_document.h — reading exactly one YAML document with yaml-cpp 0.7,
// around its failure modes, so the config parser sees a Node or a one-line
// error and never hangs.
//
// yaml-cpp 0.7's LoadAll loops forever, allocating, on a document that is a
// stray ',' (jbeder/yaml-cpp#1040, fixed upstream by #1319 after 0.7): its
// parser reports an empty document without consuming the token, again and
// again. Five bytes (",*c0\n") took 18 s and 3.8 GB before bad_alloc here;
// our config fuzzer found it. So documents are counted first with a
// bounded number of parser calls, and a parser that starts two documents at
// the same place is stuck, which is reported as a syntax error.
//
// Internal to src/config. Pure; thread-safe; allocates; never throws.
#ifndef GPUSLICE_CONFIG_YAML_DOCUMENT_H_
#define GPUSLICE_CONFIG_YAML_DOCUMENT_H_

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::config {

// The single document in `yaml` (a null Node when there is none: an empty
// file or only comments). Errors: a syntax error, more than one document.
// Messages begin with `file_name:LINE: `.
StatusOr<YAML::Node> LoadSingleDocument(std::string_view yaml, const std::string& file_name);

}  // namespace gpuslice::config

#endif  // GPUSLICE_CONFIG_YAML_DOCUMENT_H_
