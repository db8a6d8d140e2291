// The bounds a veil server enforces before doing any work for a call, and its batching knobs.
#ifndef VEIL_SERVER_LIMITS_H_
#define VEIL_SERVER_LIMITS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "dpf/params.h"

namespace veil::server {

// The PRGs whose keys a dpf2 server accepts unless told otherwise (--prgs): SipHash, the least
// analysed of them, is left out.
inline constexpr dpf::Prg kDefaultPrgs[] = {dpf::Prg::kAes128, dpf::Prg::kChaCha8,
                                            dpf::Prg::kChaCha12, dpf::Prg::kChaCha20};

struct ServerLimits {
  // Keys in one answer/answerPooled call. 1024 keys of a 2^30-row table are ~0.5 MiB.
  uint32_t max_keys_per_call = 1024;
  // Size of one call's parameters as the server measures them (an error reply above this).
  uint64_t max_message_bytes = uint64_t{1} << 20;
  // Keys waiting for the backend across all connections; calls beyond it get RESOURCE_EXHAUSTED
  // instead of growing the queue without bound, unless they push out the newest calls of a
  // connection holding more of the queue than theirs would (BatchScheduler::Submit), so that
  // clients who fill it through several connections cannot keep another connection out.
  uint32_t max_queued_keys = 16384;
  // Keys one connection may have waiting, so that a single connection cannot fill the whole queue
  // (RESOURCE_EXHAUSTED for that connection's further calls).
  uint32_t max_queued_keys_per_connection = 4096;
  // Keys handed to the backend in one table pass, and how long the oldest waiting key may wait for
  // more to join it (the scheduler also never waits longer than 1/8 of the previous pass, so that
  // a lone client on a small table does not pay the full wait).
  uint32_t max_batch_keys = 64;
  absl::Duration max_wait = absl::Milliseconds(2);
  // Open connections (TLS handshakes included). At the limit, a new connection takes the place of
  // the connection idle the longest (idle at least min_idle_to_evict), else of one of the address
  // holding the most if it holds at least two more than the newcomer's (server/connections.h);
  // else the new one is refused with RESOURCE_EXHAUSTED (it gets that error to its first call).
  uint32_t max_connections = 1024;
  absl::Duration min_idle_to_evict = absl::Seconds(1);
  // A connection with no byte in either direction and no message half read for this long is
  // closed (clients reconnect on their next call).
  absl::Duration idle_timeout = absl::Seconds(60);
  // A message must arrive whole within this time from its first byte, or its connection is closed
  // (slow senders hold memory: the declared message size is reserved as it starts).
  absl::Duration read_timeout = absl::Seconds(10);
  // Bytes reserved for messages being received, all connections together; a message whose
  // declared size would exceed it takes the room of messages arriving too slowly, or else closes
  // its own connection (server/connections.h). Each connection is bounded by HardMessageWords().
  uint64_t max_buffered_bytes = uint64_t{256} << 20;
  // Calls of one connection not yet answered; more get RESOURCE_EXHAUSTED.
  uint32_t max_calls_per_connection = 64;
  // How long a new connection may take to finish its TLS handshake before it is closed, so that
  // silent or plaintext peers do not hold a connection slot (they count in max_connections).
  absl::Duration tls_handshake_timeout = absl::Seconds(10);

  // Protocol bfv-bag. A query ciphertext holds 512 KiB once parsed at N = 8192 (2 x 4 x 8192
  // residues) and costs a whole matrix-vector product, so its queue is bounded in ciphertexts:
  // across all connections, and per connection.
  uint32_t max_queued_ciphertexts = 64;
  uint32_t max_queued_ciphertexts_per_connection = 8;
  // Memory given to all sessions' Galois keys together (parsed keys, uploads' bytes as they
  // arrive and, from their last chunk, their parsed size): one session's keys take 3 x their
  // ~4-16 MB of wire bytes at N = 8192. Closed connections' keys, then idle uploads, then idle
  // sessions' keys are evicted, least recently used first, to make room; keys in use never
  // (galois_cache.h).
  uint64_t max_galois_key_bytes = uint64_t{2} << 30;
  // How long a closed connection's keys wait within that memory for the client's next connection
  // to resume them (resumeGaloisKeys) instead of uploading them again; zero: they go with it.
  absl::Duration key_resume = absl::Hours(1);

  // Any incoming RPC message larger than this closes its connection (capnp's
  // ReaderOptions::traversalLimitInWords, checked before the message is buffered). It sits above
  // max_message_bytes so that merely oversized calls still get a readable error reply.
  uint64_t HardMessageWords() const { return max_message_bytes / 8 * 2 + 4096; }
  // A connection stops being read while its calls not yet answered (pipelined ones included) or
  // its replies not yet sent exceed this many words, until they drain: TCP then holds the client
  // back, and the idle timeout closes one that never reads its replies.
  uint64_t ConnectionBacklogWords() const { return 4 * HardMessageWords(); }
};

}  // namespace veil::server

#endif  // VEIL_SERVER_LIMITS_H_
