// Protocols "lwe-simple" and "lwe-double": single-server lattice PIR over LWE (pir/lattice/,
// docs/lattice.md), served. At start-up the table's rows (whole rows, tag words included: one
// record per row) become the D1 x D0 byte matrix and its hint is read from the hint file next to
// the table (--lwe_hint_file) when current, else computed (logged with its duration) and written
// there (unless --lwe_hint_cache=false). Each connection may then download the hint blob in
// chunks (`hint`) and send queries (`answer`).
//
// The first level's product runs where --backend says (server/backend_select.h: the CPU kernels,
// or gpu/lwe.h's device product on the first device of --gpus); the hint is computed on the CPU.
//
// Queries of every connection are batched by the shared BatchScheduler: one pass answers all the
// waiting queries with one product over the database (DB x [q_1 ... q_B]), on the scheduler's
// worker. Queues are bounded in queries (the dpf2 key limits: max_keys_per_call,
// max_queued_keys, max_queued_keys_per_connection, max_batch), and every size is checked before
// any work.
#ifndef VEIL_SERVER_LWE_H_
#define VEIL_SERVER_LWE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pir/lattice/server.h"
#include "server/protocol.h"

namespace veil::server {

// Protocol "lwe-simple" (SimplePIR) or "lwe-double" (DoublePIR) over env.table.
// Returns INVALID_ARGUMENT for a table the protocol cannot shape (lattice::ChooseShape) or limits
// no query could meet (a query or its answer larger than max_message_bytes: DoublePIR answers
// are R * (n + 1) * 16 bytes for R-byte rows, ~1.2 MB for 64-byte rows), and the hint file's errors
// when it cannot be written (lattice::LoadOrComputeHint).
absl::StatusOr<std::unique_ptr<Protocol>> CreateLweSimpleProtocol(const ProtocolEnv& env);
absl::StatusOr<std::unique_ptr<Protocol>> CreateLweDoubleProtocol(const ProtocolEnv& env);

// What the LWE protocols share with lwe-exppack-s (server/lwe_pack.h), which serves a SimplePIR
// instance too.
struct PreparedLweServer {
  std::unique_ptr<lattice::LweServer> server;
  double hint_s = 0;  // the hint's preparation, logged
};
// The LWE server of env.table in the shape ChooseShape picks with shape_options, with its hint
// (the hint file as --lwe_hint_file and --lwe_hint_cache say, by default TABLE.<name>.hint;
// logged as protocol `name`) and the --backend product for batches of up to max_batch queries,
// whose CPU kernels are measured now. Returns INVALID_ARGUMENT for a table the protocol cannot
// shape, LweServer::FromTable's and CreateLweProduct's errors.
absl::StatusOr<PreparedLweServer> PrepareLweServer(lattice::Protocol protocol,
                                                   const ProtocolEnv& env, const std::string& name,
                                                   uint32_t max_batch,
                                                   const lattice::ShapeOptions& shape_options = {});
// The `config` reply's LweConfig of an instance over `file` (queryWords, answerWords: the shape's).
void FillLweConfig(const lattice::LweConfig& c, const embedding::Table& file,
                   const ServerLimits& limits, uint32_t max_queries_per_call,
                   const std::string& backend, rpc::LweConfig::Builder config);

}  // namespace veil::server

#endif  // VEIL_SERVER_LWE_H_
