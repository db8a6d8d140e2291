// A process's resident memory, read from /proc: the server exports its own (server/metrics.h), and
// tests and benchmarks watch a server's (tools/launcher.h); and the allocator policy a server
// runs with.
#ifndef VEIL_SERVER_PROCESS_MEMORY_H_
#define VEIL_SERVER_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

namespace veil::server {

// The resident memory (VmRSS, KiB) of process `pid`; 0 if it cannot be read (no such process).
uint64_t ResidentKb(pid_t pid);

// Keeps freed memory in the process for the next query (glibc: blocks up to 64 MiB from the heap
// rather than from fresh mappings, and the heap's free top returned to the system only beyond
// 1 GiB). With glibc's defaults a query's ciphertexts (512 KiB each, 64 MiB for a bfv-bag query
// at 2^20 rows) were mapped, faulted in, zeroed and unmapped again on every query: half of a bag
// query's parse on a 2-vCPU VM (81 -> 43 ms on one thread). Call it before any thread starts
// (veil-server does, first thing; veil-bench's he suite sets the same). The resident memory then
// stays near its peak, which the servers' limits bound.
void KeepFreedMemoryForReuse();

}  // namespace veil::server

#endif  // VEIL_SERVER_PROCESS_MEMORY_H_
