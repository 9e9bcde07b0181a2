// log.h — logging that is safe inside someone else's process.
//
// Writes one line per call straight to stderr with write(2): no allocation, no
// locks, no stdio buffering, so it may be called from any thread, from signal-
// adjacent paths and from atexit handlers. Lines longer than 512 bytes are cut.
// The level comes from GPUSLICE_LOG (error|warn|info|debug; default warn), read
// once. Logging is for slow paths only; the hot path never logs.
#ifndef GPUSLICE_PORT_LOG_H_
#define GPUSLICE_PORT_LOG_H_

namespace gpuslice::port {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_LOG_H_
