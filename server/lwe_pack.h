// Protocol "lwe-exppack-s": single-server lattice PIR without a hint (pir/lattice/pack_simple.h,
// docs/lattice.md), served. At start-up the table becomes a SimplePIR instance as for lwe-simple
// (server/lwe.h: its hint file, --backend product) whose hint becomes the packing matrix. Each
// connection is a session that uploads its expansion keys once (chunked, parsed and checked,
// held by GaloisKeyCache within --max_galois_key_bytes with bfv-bag's eviction rule) and then
// sends lookups: a query and the RLWE ciphertext of its LWE secret, answered with the packed
// response (ceil(D1 / N) RLWE ciphertexts switched to one prime).
//
// Protocol "lwe-hybrid" is served by the same code: each lookup also carries the RGSW selection of
// its record's window (pir/lattice/hybrid.h), and the response is that window's ciphertexts. So
// is "lwe-exppack-d" (pir/lattice/pack_double.h): a DoublePIR instance whose hint H2 is the
// packing matrix; each lookup carries R ciphertexts (one per record byte), each expanded. And
// "lwe-double-pack" (pir/lattice/double_pack.h): lwe-exppack-s's packed ciphertexts folded by a
// second query and packed again; each lookup carries two queries and two ciphertexts.
//
// Work leaves the event loop: parsing keys and answering (the SimplePIR product, the expansion and
// the packing, ~0.15 to 0.2 s of CPU per query) run on the shared BatchScheduler's worker; a pass
// takes up to --threads queries of any sessions, which share one SimplePIR product and are then
// expanded one per thread, each with its own session's keys. Queues are bounded in queries as
// bfv-bag's in query ciphertexts (--max_queued_ciphertexts, overall and per connection).
#ifndef VEIL_SERVER_LWE_PACK_H_
#define VEIL_SERVER_LWE_PACK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/protocol.h"

namespace veil::server {

// Protocol "lwe-exppack-s" over env.table with lattice::RingParams::Default(). Returns
// INVALID_ARGUMENT for a table SimplePIR cannot shape or limits no lookup or key upload could
// meet (a query and its ciphertext, or a response, larger than max_message_bytes; one session's
// keys over max_galois_key_bytes; no query allowed to wait), PrepareLweServer's errors, and
// FAILED_PRECONDITION for ring parameters without a security claim.
absl::StatusOr<std::unique_ptr<Protocol>> CreateLwePackProtocol(const ProtocolEnv& env);
// Protocol "lwe-hybrid", with the same errors (a lookup's bytes include its selection).
absl::StatusOr<std::unique_ptr<Protocol>> CreateLweHybridProtocol(const ProtocolEnv& env);
// Protocol "lwe-exppack-d", with the same errors.
absl::StatusOr<std::unique_ptr<Protocol>> CreateLweExpPackDProtocol(const ProtocolEnv& env);
// Protocol "lwe-double-pack", with the same errors.
absl::StatusOr<std::unique_ptr<Protocol>> CreateLweDoublePackProtocol(const ProtocolEnv& env);

}  // namespace veil::server

#endif  // VEIL_SERVER_LWE_PACK_H_
