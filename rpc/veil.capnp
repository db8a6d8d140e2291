# The wire protocols between a veil client and a veil server.
#
# A server process speaks one protocol (veil-server --protocol): its bootstrap capability is that
# protocol's interface, which extends `VeilServer`. A client first calls `hello` and refuses a server
# of another protocol or another version, with a clear error, before any protocol call.
#
# Versioning: `protocolVersion` below is reported by `hello`; a client refuses a server whose
# version it does not know. Fields are only ever added (new ordinals), never renumbered or
# reinterpreted; a change that old clients would misread bumps the version (2: `hello`, `stats`
# moved to `VeilServer`).
#
# Protocol "dpf2" (PirServer): two non-colluding servers; a server only ever sees DPF key shares,
# and one key reveals nothing about the row it selects. The client talks to both parties and adds
# (or XORs) their shares; see DESIGN.md.
#
# Protocol "bfv-bag" (BagServer): one server; the client sends its bag's weights encrypted under
# its own BFV key (pir/he/bag.h) and gets back Enc(T^T w), the pooled row, which only it can
# decrypt (a compressed ciphertext since 2026-12-06: a client from before refuses it as an HE
# object of another kind). The server needs the client's Galois keys (public key material,
# ~4-16 MB at N = 8192), uploaded once per connection in chunks and held within a server-wide
# memory bound.
#
# Protocols "lwe-simple" and "lwe-double" (LweServer): one server; single-server lattice PIR over
# LWE (pir/lattice/, docs/lattice.md). The client downloads the table's hint once (chunked,
# resumable, keyed by its digest), then per lookup sends a query (an LWE encryption of a unit
# vector over the database columns, under a fresh secret) and decrypts the answer with the hint.
# The server learns nothing about the row; its work depends only on the sizes.
#
# Protocol "lwe-exppack-s" (LwePackServer): one server, no hint (pir/lattice/pack_simple.h,
# docs/lattice.md): SimplePIR whose answer the server ring-packs into RLWE ciphertexts with
# special ciphertexts it expands from one RLWE ciphertext of the query's LWE secret. Each
# connection is a session that uploads the client's expansion keys (~3.4 MiB of Galois keys,
# public) once, in chunks, held within a server-wide memory bound; each lookup then sends a query
# and the secret's ciphertext and gets the packed response, which only the client can decrypt.
# Protocol "lwe-hybrid" (the same LwePackServer) adds to each lookup RGSW ciphertexts of the bits
# of the record's window, with which the server selects the packed ciphertexts it returns
# (pir/lattice/hybrid.h). Protocol "lwe-exppack-d" (the same again) packs DoublePIR's
# second-level answers: each lookup sends one secret ciphertext per record byte
# (pir/lattice/pack_double.h).
#
# Errors: a refused call fails with a Cap'n Proto exception whose reason starts with the absl
# status code name, e.g. "INVALID_ARGUMENT: key 3 is for party 1 but this server is party 0"
# (rpc/status.h). Calls over Limits get such a reply; messages far beyond them close the
# connection.
@0x8ad9d5007af62d40;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("veil::rpc");

const protocolVersion :UInt16 = 2;

struct TableId {
  # Which table version produced a share. Both servers must report the same one; a client never
  # combines shares from different tables.
  digest @0 :Data;    # BLAKE2b-256 of the table contents (32 bytes)
  epoch @1 :UInt64;   # deployment-chosen version counter stored in the table file
}

struct Limits {
  # Checked by the server before any work; a call over a limit gets an error reply.
  maxKeysPerCall @0 :UInt32;
  maxMessageBytes @1 :UInt64;   # size of one call's parameters
  maxQueuedKeys @2 :UInt32;     # keys waiting for the backend across all connections
  maxQueuedKeysPerConnection @3 :UInt32;  # keys one connection may have waiting
}

struct Hello {
  protocol @0 :Text;            # "dpf2", ...: the interface the bootstrap capability implements
  protocolVersion @1 :UInt16;
}

struct Config {
  # Protocol "dpf2": the table this party serves and how to query it.
  party @0 :UInt8;              # 0 or 1: the keys this server accepts
  table @1 :TableId;
  rows @2 :UInt64;
  rowWords @3 :UInt32;          # 32-bit words per row (W): the size of one share
  dim @4 :UInt32;               # embedding dimension (values per row once decoded)
  rowFormat @5 :UInt8;          # embedding::RowFormat wire id
  fracBits @6 :UInt8;           # fixed-point rows: value = int32 / 2^fracBits
  logDomain @7 :UInt8;          # DPF domain the keys must have: ceil(log2(rows)), at least 1
  prgs @8 :List(UInt8);         # dpf::Prg wire ids the server evaluates
  outputTypes @9 :List(UInt8);  # dpf::OutputType wire ids ("answerPooled" needs additive)
  limits @10 :Limits;
  backend @11 :Text;            # "cpu" or "gpu", for diagnostics only
  rangeQueries @12 :Bool;       # accepts `ranges` in answer / answerPooled
  rowTag @13 :UInt8;            # embedding::RowTag: rows end with an authentication tag that
                                # clients holding the table's row key check (rowWords counts it)
  epochs @14 :List(TableId);    # every table version served now, oldest first; `table` is the
                                # newest. All have this config's shape (rows, rowWords, format...).
                                # Older ones are served for a grace period after a roll (see
                                # docs/serving.md), then refused.
}

struct RowRange {
  # Rows [firstRow, firstRow + rows) of the table: a key with a range is evaluated over these rows
  # only, so its DPF domain is LogDomainForRows(rows) and it selects the row at its index within
  # the range. The range must be inside the table and not empty.
  firstRow @0 :UInt64;
  rows @1 :UInt64;
}

struct Stats {
  calls @0 :UInt64;             # answer + answerPooled calls accepted
  keys @1 :UInt64;              # keys answered
  passes @2 :UInt64;            # backend passes (batches)
  meanBatchKeys @3 :Float64;
  maxBatchKeys @4 :UInt32;
  latencyP50Ms @5 :Float64;     # call arrival to reply, over the most recent calls
  latencyP90Ms @6 :Float64;
  latencyP99Ms @7 :Float64;
  queuedKeys @8 :UInt32;        # waiting for the backend now
  errors @9 :UInt64;            # calls rejected with an error reply
  connections @10 :UInt32;      # open now
  uptimeS @11 :Float64;
}

interface VeilServer {
  # What every veil server answers, whatever its protocol.
  hello @0 () -> (hello :Hello);
  stats @1 () -> (stats :Stats);
}

interface PirServer extends(VeilServer) {
  # Protocol "dpf2".
  config @0 () -> (config :Config);

  answer @1 (keys :List(Data), ranges :List(RowRange), table :TableId)
      -> (shares :List(UInt32), table :TableId, newestEpoch :UInt64);
  # One serialized dpf::DpfKey per requested row; `shares` holds rowWords words per key, in order.
  # `ranges`: absent or empty, every key is over the whole table (domain `logDomain`); otherwise one
  # range per key (servers reporting `rangeQueries` only).
  # `table`: the version to answer from (one of config.epochs; a client sends the same one to both
  # parties); absent, the newest. Its digest, when not empty, must match the served one's. A
  # version not served (any more) gets FAILED_PRECONDITION "epoch N is no longer served (serving
  # M)". `newestEpoch`: the newest version served now; a client using an older one reads `config`
  # again to move on.

  answerPooled @2 (keys :List(Data), bagSizes :List(UInt32), ranges :List(RowRange),
                   table :TableId)
      -> (shares :List(UInt32), table :TableId, newestEpoch :UInt64);
  # Keys grouped into consecutive bags (sizes sum to the key count); each bag's shares are summed
  # mod 2^32 and returned as one share of rowWords words, so the download shrinks by the bag size.
  # The weights live inside the keys (the DPF's beta), hidden from the server. Additive keys only.
  # `ranges`, `table` and `newestEpoch` as in `answer`.
}

struct BagLimits {
  # Protocol "bfv-bag": checked by the server before any work.
  maxMessageBytes @0 :UInt64;           # size of one call's parameters (a query, a key chunk)
  maxQueuedCiphertexts @1 :UInt32;      # query ciphertexts waiting, all connections together
  maxQueuedCiphertextsPerConnection @2 :UInt32;
  maxGaloisKeyBytes @3 :UInt64;         # memory the server gives all sessions' Galois keys
}

struct BagConfig {
  # Protocol "bfv-bag": the table and the parameters a client encrypts for.
  table @0 :TableId;
  rows @1 :UInt64;
  dim @2 :UInt32;
  fracBits @3 :UInt8;            # fixed-point rows: value = int32 / 2^fracBits
  logN @4 :UInt8;                # BFV ring degree 2^logN: the parameters are he::BagParams(logN)
  tableInfo @5 :Data;            # he::SerializeBagTableInfo: parameter id, shape, max |T|
  queryBlocks @6 :UInt32;        # ciphertexts in one query (one per block of 2^logN rows)
  galoisKeyBytes @7 :UInt64;     # exact size of the serialized Galois keys (he::SerializeGaloisKeys)
  maxChunkBytes @8 :UInt64;      # key bytes accepted in one uploadGaloisKeys call
  limits @9 :BagLimits;
  backend @10 :Text;             # "cpu", for diagnostics only
  rowTag @11 :UInt8;             # embedding::RowTag: 0, or 4 (kLinearMac61): each row ends with
                                 # two tag columns, pooled with the data (tableInfo's dim counts
                                 # them, `dim` does not), which clients holding the row key check
  roundedQueries @12 :Bool;      # the server reads query ciphertexts whose c_0 is rounded
                                 # (he::SerializeCiphertext's round_c0_bits; pir/he/bag.h's
                                 # kBagQueryRoundBits); false from servers before 2026-12-06
}

interface BagServer extends(VeilServer) {
  # Protocol "bfv-bag".
  config @0 () -> (config :BagConfig);

  uploadGaloisKeys @1 (offset :UInt64, chunk :Data)
      -> (receivedBytes :UInt64, installed :Bool, resumeToken :Data);
  # The session's Galois keys (exactly config.galoisKeyBytes bytes) in consecutive chunks of at most
  # maxChunkBytes: each chunk starts where the previous one ended (offset 0 starts over, dropping
  # this connection's keys). The call of the last chunk returns once the keys are validated
  # (parameter id, sizes, every residue, exactly the rotations the table needs) and installed.
  # The keys belong to this connection until resumeGaloisKeys (below) moves them to another.
  # RESOURCE_EXHAUSTED if the server's key memory (maxGaloisKeyBytes) is held by keys in use.

  answer @2 (query :Data) -> (answer :Data, table :TableId);
  # `query`: he::SerializeBagQuery (queryBlocks ciphertexts of the client's weights, their c_0
  # rounded where config.roundedQueries says so); `answer`: he::SerializeCompressedCiphertext of
  # Enc(T^T w). FAILED_PRECONDITION before the keys are installed;
  # ABORTED if they were evicted to make room for another session's (upload them again).

  resumeGaloisKeys @3 (token :Data) -> (resumeToken :Data);
  # As LwePackServer.resumeGaloisKeys.
}

struct LweLimits {
  # Protocols "lwe-simple" and "lwe-double": checked by the server before any work.
  maxQueriesPerCall @0 :UInt32;
  maxMessageBytes @1 :UInt64;               # size of one call's parameters
  maxQueuedQueries @2 :UInt32;              # queries waiting for the worker, all connections
  maxQueuedQueriesPerConnection @3 :UInt32;
}

struct LweConfig {
  # Protocols "lwe-simple" and "lwe-double": the table, and everything public about the protocol
  # instance (pir/lattice/server.h LweConfig). A client recomputes the shape and the seed from
  # these figures and refuses any disagreement before it uses them.
  table @0 :TableId;
  rows @1 :UInt64;
  rowWords @2 :UInt32;           # words per row, tag words included: a record is 4 * rowWords bytes
  dim @3 :UInt32;
  rowFormat @4 :UInt8;           # embedding::RowFormat wire id
  fracBits @5 :UInt8;
  rowTag @6 :UInt8;              # embedding::RowTag: rows end with an authentication tag
  lweProtocol @7 :UInt8;         # lattice::Protocol wire id: 1 SimplePIR, 2 DoublePIR
  lweDimension @8 :UInt32;       # n
  logModulus @9 :UInt8;          # log2 q
  plaintextModulus @10 :UInt32;  # p
  sigmaMicro @11 :UInt32;        # the error's sigma in millionths
  recordsPerColumn @12 :UInt64;  # k: the database is D1 = k * 4 * rowWords rows by D0 columns
  d0 @13 :UInt64;
  d1 @14 :UInt64;
  seed @15 :Data;                # 32 bytes: the seed of the public matrices (lattice::DeriveSeed)
  hintBytes @16 :UInt64;         # the client hint blob (pir/lattice/hint.h)
  hintDigest @17 :Data;          # BLAKE2b-256 of the blob: the cache key of a client's hint
  hintChunkBytes @18 :UInt64;    # bytes of every `hint` chunk but the last
  queryWords @19 :UInt64;        # 32-bit words of one query
  answerWords @20 :UInt64;       # 32-bit words of one answer
  limits @21 :LweLimits;
  backend @22 :Text;             # "cpu", for diagnostics only
}

interface LweServer extends(VeilServer) {
  # Protocols "lwe-simple" and "lwe-double".
  config @0 () -> (config :LweConfig);

  hint @1 (chunk :UInt64, hintDigest :Data) -> (data :Data);
  # Chunk `chunk` of the hint blob (hintChunkBytes bytes, the last one shorter): a download resumes
  # at any chunk. `hintDigest` is the digest the client is downloading; FAILED_PRECONDITION ("stale
  # hint") if the server now serves another, OUT_OF_RANGE for a chunk past the end,
  # RESOURCE_EXHAUSTED once a connection has been sent twice the hint's bytes (reconnect).

  answer @2 (queries :Data, hintDigest :Data) -> (answers :Data, table :TableId);
  # One or more queries (queryWords little-endian 32-bit words each, back to back) made with the
  # hint of digest `hintDigest`; `answers` holds answerWords words per query, in order. Queries of
  # every connection are answered together, as one product per table pass. INVALID_ARGUMENT for a
  # size that is not a whole number of queries, more than maxQueriesPerCall, or answers that
  # would not fit maxMessageBytes;
  # FAILED_PRECONDITION ("stale hint") for another hint digest.
}

struct LwePackConfig {
  # Protocol "lwe-exppack-s": the SimplePIR instance underneath and the ring it packs into. A
  # client recomputes the shape, the seed and every size below from these figures and its own
  # ring parameters, and refuses any disagreement before it uses them.
  lwe @0 :LweConfig;             # lweProtocol 1 (SimplePIR); queryWords = d0; answerWords: the
                                 # LWE answer before packing (never sent); hintBytes / hintDigest
                                 # name the server's packing matrix (the hint, never downloaded);
                                 # limits.maxQueriesPerCall is 1 (one query per answer call)
  logN @1 :UInt8;                # ring degree N = 2^logN (lattice::RingParams)
  primes @2 :List(UInt64);       # the primes of Q; primes[0] is the response modulus
  specialPrime @3 :UInt64;       # P of the expansion keys' hybrid key switching (keys mod QP)
  expansionKeyBytes @4 :UInt64;  # exact size of a session's keys (lattice::ExpansionKeyBytes)
  secretCiphertextBytes @5 :UInt64;  # the ciphertext of each query (lattice::SecretCiphertextBytes)
  responseBytes @6 :UInt64;      # one packed response: ceil(d1 / N) x 8N (PackedResponseBytes)
  maxChunkBytes @7 :UInt64;      # key bytes accepted in one uploadGaloisKeys call
  maxKeyBytes @8 :UInt64;        # memory the server gives all sessions' keys (uploaded + parsed)
  selectionBytes @9 :UInt64;     # lwe-hybrid: each lookup's selection (HybridSelectionBytes);
                                 # lwe-exppack-s: 0. responseBytes is then the window's
                                 # (HybridResponseBytes)
  ciphertextsPerQuery @10 :UInt32;  # secret ciphertexts per lookup: 1, or (lwe-exppack-d, whose
                                    # lwe config is DoublePIR's) one per record byte
}

interface LwePackServer extends(VeilServer) {
  # Protocols "lwe-exppack-s", "lwe-hybrid" and "lwe-exppack-d".
  config @0 () -> (config :LwePackConfig);

  uploadGaloisKeys @1 (offset :UInt64, chunk :Data)
      -> (receivedBytes :UInt64, installed :Bool, resumeToken :Data);
  # The session's expansion keys (exactly config.expansionKeyBytes bytes, he::SerializeGaloisKeys of
  # the expansion's Galois elements) in consecutive chunks of at most maxChunkBytes: each chunk
  # starts where the previous one ended (offset 0 starts over, dropping this connection's keys).
  # The call of the last chunk returns once the keys are parsed and checked (every residue, exactly
  # the elements the expansion needs) and installed; they belong to this connection, and its reply
  # carries their `resumeToken` (16 bytes; empty where the server keeps no keys after their
  # connection, veil-server --key_resume_s=0). INVALID_ARGUMENT for an empty chunk, a wrong
  # offset, bytes past expansionKeyBytes or keys that do not parse; FAILED_PRECONDITION while the previous upload is being parsed or an answer
  # uses the keys; RESOURCE_EXHAUSTED if the key memory (maxKeyBytes) is held by keys in use.

  answer @2 (query :Data, ciphertext :Data, selection :Data) -> (response :Data, table :TableId);
  # `query`: one SimplePIR query, d0 little-endian 32-bit words (lwe-exppack-d: DoublePIR's,
  # queryWords); `ciphertext`: the RLWE ciphertexts of its LWE secrets, ciphertextsPerQuery x
  # secretCiphertextBytes; `selection` (lwe-hybrid; empty otherwise): the
  # RGSW ciphertexts of its window (selectionBytes, he::SerializeRgswCiphertexts); `response`:
  # responseBytes bytes of packed ciphertexts switched to primes[0]. INVALID_ARGUMENT for a query,
  # ciphertext or selection of another size or a residue not below its prime;
  # FAILED_PRECONDITION before the keys are installed; ABORTED if they were evicted to make room
  # for another session's (upload them again);
  # RESOURCE_EXHAUSTED when this connection or the server has too many queries waiting.

  resumeGaloisKeys @3 (token :Data) -> (resumeToken :Data);
  # The keys an earlier connection of this client uploaded, installed on this one without sending
  # them again: `token` is the resumeToken of their upload's last chunk (or of the last resume),
  # and the reply carries the next one (the presented token stays good until this connection's
  # first answer or the next token's resume: present it again if the reply was lost, but send
  # answers only after the reply has come). A closed connection's keys wait
  # veil-server --key_resume_s (an hour by default), are evicted before any other key memory
  # and count in maxKeyBytes; an open connection's move unless an answer is using them (its next
  # answer then gets ABORTED). NOT_FOUND if no keys are held under the token (never issued,
  # expired, evicted, spent or in use): upload them; FAILED_PRECONDITION if this
  # connection has keys or an upload; INVALID_ARGUMENT for a token of another size.
}
