// quote.h — user-supplied text as error messages show it, so that a value
// with a newline or a megabyte of junk still gives a one-line error.
//
// Pure functions; thread-safe; allocate.
#ifndef GPUSLICE_CONFIG_QUOTE_H_
#define GPUSLICE_CONFIG_QUOTE_H_

#include <string>
#include <string_view>

namespace gpuslice::config {

// In double quotes, with \ and " escaped, control characters written as \n,
// \t or \xNN, and cut after 64 bytes with "...".
std::string Quote(std::string_view value);

// Control characters escaped as Quote does, cut after 200 bytes; no quotes.
// For text from libraries (yaml-cpp's messages) that may echo input.
std::string OneLine(std::string_view text);

}  // namespace gpuslice::config

#endif  // GPUSLICE_CONFIG_QUOTE_H_
