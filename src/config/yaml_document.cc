#include "config/yaml_document.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>
#include <vector>

#include "config/quote.h"

namespace gpuslice::config {
namespace {

// Records where each document starts; builds nothing.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

std::string At(const std::string& file, const YAML::Mark& mark) {
  return mark.is_null() ? file : file + ":" + std::to_string(mark.line + 1);
}

}  // namespace

StatusOr<YAML::Node> LoadSingleDocument(std::string_view yaml, const std::string& file_name) {
  const std::string text(yaml);
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts events;
    // Three calls tell one document from two, and a stuck parser (the same
    // start twice) from a real second document.
    for (int i = 0; i < 3 && parser.HandleNextDocument(events); ++i) {
      const size_t n = events.starts.size();
      if (n >= 2 && events.starts[n - 1].pos == events.starts[n - 2].pos) {
        return Status::Error(At(file_name, events.starts[n - 1]) +
                             ": YAML syntax error: unexpected token (a ',' outside [ ] or { }?); fix the YAML at "
                             "that line");
      }
    }
    if (events.starts.size() > 1) {
      return Status::Error(At(file_name, events.starts[1]) +
                           ": the file holds more than one YAML document; keep one (remove the '---' separators)");
    }
    // One document at most: Load reads it and stops, whatever follows.
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Error(At(file_name, e.mark) + ": YAML syntax error: " + OneLine(e.msg) +
                         "; fix the YAML at that line");
  } catch (const std::exception& e) {
    return Status::Error(file_name + ": cannot parse: " + OneLine(e.what()));
  }
}

}  // namespace gpuslice::config
