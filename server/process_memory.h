// A process's resident memory, read from /proc: the server exports its own (server/metrics.h), and
// tests and benchmarks watch a server's (tools/launcher.h).
#ifndef VEIL_SERVER_PROCESS_MEMORY_H_
#define VEIL_SERVER_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

namespace veil::server {

// The resident memory (VmRSS, KiB) of process `pid`; 0 if it cannot be read (no such process).
uint64_t ResidentKb(pid_t pid);

}  // namespace veil::server

#endif  // VEIL_SERVER_PROCESS_MEMORY_H_
