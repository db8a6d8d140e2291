// Protocol "bfv-bag": single-server private pooled embeddings (pir/he/bag.h). The table's
// fixed-point rows (with their two tag columns when tagged with kind 4, embedding/row_tag.h, so
// that clients can check the pooled sums) are encoded once at start-up as the BSGS diagonals of
// T^T; each connection is a
// session that uploads its Galois keys once (chunked, validated, held by GaloisKeyCache within
// --max_galois_key_bytes) and then sends encrypted bags, each answered with Enc(T^T w).
//
// Work leaves the event loop: parsing uploaded keys and queries and the matrix-vector products
// run on the shared BatchScheduler's worker, one item per call (a pass holds one item: products
// of different clients share nothing but the table read. TODO(perf): answer several queries per
// pass over each diagonal). Queues are bounded in query ciphertexts, overall and per connection.
#ifndef VEIL_SERVER_BFV_BAG_H_
#define VEIL_SERVER_BFV_BAG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/protocol.h"

namespace veil::server {

// Encodes the table for he::BagParams(options.bfv_log_n). Returns INVALID_ARGUMENT for a table
// that is not fixed-point or whose rows carry SipHash tags (kinds 1-3), a shape the parameters
// cannot serve (dim > N/2), a bfv_log_n other than 13 or 14, or limits that no query or key upload
// could meet (a query larger than max_message_bytes, more ciphertexts than
// max_queued_ciphertexts_per_connection, one session's keys over max_galois_key_bytes).
absl::StatusOr<std::unique_ptr<Protocol>> CreateBfvBagProtocol(const ProtocolEnv& env);

}  // namespace veil::server

#endif  // VEIL_SERVER_BFV_BAG_H_
