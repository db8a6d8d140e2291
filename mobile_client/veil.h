/* veil C ABI: private embedding lookups through two PIR servers (veil_client, protocol dpf2),
 * private pooled lookups from one server (veil_bag_client, protocol bfv-bag), or private lookups
 * from one LWE PIR server (veil_lwe_client, protocols lwe-simple and lwe-double), for apps that
 * cannot link C++.
 *
 * C99. Handles are opaque; every buffer is owned by the caller and passed with its length in
 * elements; every function returns VEIL_OK (0) or a negative VEIL_ERR_* code and never lets a C++
 * exception out. After an error, veil_last_error() describes it (per thread).
 *
 * A client object may be used from several threads (calls are serialized); close it once.
 */
#ifndef VEIL_MOBILE_CLIENT_VEIL_H_
#define VEIL_MOBILE_CLIENT_VEIL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI's version. Fields are only ever appended to the structs of this header, and the version
 * bumps whenever a struct grows or functions are added (2: veil_client_options gained the TLS
 * fields; 3: layout lookups; 4: struct_size first in every options struct, row authentication
 * keys; 5: veil_lwe_client; 6: min_epoch in the client options; 7: veil_lwe_prepare_queries;
 * 8: row_key_file and min_epoch in veil_bag_client_options; 9: failure_latch_file in every
 * options struct; 10: threads in veil_bag_client_options).
 * Every options struct starts with struct_size, which the caller sets to the sizeof the struct it
 * was compiled with: a library refuses (VEIL_ERR_INVALID_ARGUMENT) a size it does not know, so an
 * app built against another veil.h is detected instead of misread. Check veil_abi_version() ==
 * VEIL_ABI_VERSION at start-up as well.
 *
 * Handles: a closed handle, or a pointer that is not a live handle of the right kind, is refused
 * with VEIL_ERR_INVALID_ARGUMENT (handles are opaque tokens the library tracks, never reused, so
 * a closed one never names a later handle's object); closing twice is harmless. Using a handle
 * while another thread closes it is not detected. */
#define VEIL_ABI_VERSION 10

/* Return codes: the negated absl::StatusCode values. */
#define VEIL_OK 0
#define VEIL_ERR_CANCELLED (-1)
#define VEIL_ERR_UNKNOWN (-2)
#define VEIL_ERR_INVALID_ARGUMENT (-3)  /* bad argument, NULL pointer, buffer too small */
#define VEIL_ERR_DEADLINE_EXCEEDED (-4) /* a server did not answer within the timeout */
#define VEIL_ERR_NOT_FOUND (-5)
#define VEIL_ERR_ALREADY_EXISTS (-6)
#define VEIL_ERR_PERMISSION_DENIED (-7)
#define VEIL_ERR_RESOURCE_EXHAUSTED (-8)  /* a server is overloaded, or a limit is exceeded */
#define VEIL_ERR_FAILED_PRECONDITION (-9) /* tables differ, wrong format, TLS trust or name */
#define VEIL_ERR_ABORTED (-10)
#define VEIL_ERR_OUT_OF_RANGE (-11)
#define VEIL_ERR_UNIMPLEMENTED (-12)
#define VEIL_ERR_INTERNAL (-13)
#define VEIL_ERR_UNAVAILABLE (-14) /* a server cannot be reached, or TLS on one side only */
#define VEIL_ERR_DATA_LOSS (-15)   /* a fetched row fails its authentication tag */
#define VEIL_ERR_UNAUTHENTICATED (-16)

/* Row formats (as stored in table files). */
#define VEIL_FORMAT_FP32 1
#define VEIL_FORMAT_FP16 2
#define VEIL_FORMAT_INT8 3
#define VEIL_FORMAT_FIXED 4

/* Pooling modes of veil_lookup_pooled. */
#define VEIL_POOL_SUM 0
#define VEIL_POOL_MEAN 1

typedef struct veil_client veil_client;
typedef struct veil_layout veil_layout;

/* Zero it (memset) and set struct_size = sizeof(veil_client_options) before setting fields: a
 * zero field means its default. */
typedef struct veil_client_options {
  uint32_t struct_size; /* sizeof(veil_client_options) as the app was compiled */
  /* "HOST:PORT" of party 0, or its replicas "HOST:PORT,HOST:PORT,...": replicas of one party
   * serve the same table (one that does not is refused, naming it); a call that fails on one
   * (connection lost, unavailable) is sent again to another within timeout_ms, and a call slower
   * than the 95th percentile of recent replies is also sent to another (first reply wins).
   * A malformed list is VEIL_ERR_INVALID_ARGUMENT. */
  const char* server0;
  const char* server1; /* the same for party 1 */
  uint32_t timeout_ms; /* per call, both servers together; 0 means 5000 */
  const char* prg;     /* "aes128" (NULL), "chacha8", "chacha12", "chacha20", "siphash" */
  /* Version 2: TLS. Whoever reads both connections learns the rows, so off loopback the
   * connections must be TLS. tls_trusted_certs is the path of a PEM file of the certificates to
   * trust (the servers' self-signed certificates or the operator's CA; several may follow each
   * other; nothing else is trusted). NULL: no TLS, and servers off loopback are refused. */
  const char* tls_trusted_certs;
  const char* tls_server_name0; /* the name server 0's certificate must hold; NULL: its HOST */
  const char* tls_server_name1; /* the same for server 1 */
  /* Version 4: the table's row key file (veil table build writes TABLE.rowkey). With it every
   * fetched row's authentication tag is checked, and a row that fails is VEIL_ERR_DATA_LOSS, never
   * returned. Required when the servers' table carries tags; with it an untagged table is
   * refused (VEIL_ERR_FAILED_PRECONDITION). NULL: none. */
  const char* row_key_file;
  /* Version 4: veil_lookup_pooled pads every bag with weight-0 keys to this many keys, so that
   * the servers see the same key count for every bag (a larger bag is VEIL_ERR_INVALID_ARGUMENT).
   * 0 means the default, 32; VEIL_NO_BAG_PADDING sends bags as they are (the servers then learn
   * every bag's size). */
  uint32_t pad_bags_to;
  /* Version 6: the oldest table version (epoch) to accept; servers that serve only older ones
   * are refused (VEIL_ERR_FAILED_PRECONDITION), at connect and later. Row tags prove that a row is
   * the table's, not that the table is the newest: set it to the epoch the app last saw so that
   * servers cannot hold it on an older version. 0: any. */
  uint64_t min_epoch;
  /* Version 9: a file that stops lookups after an answer fails its check: a row that fails its
   * tag (VEIL_ERR_DATA_LOSS) writes it, and while it exists connecting and every lookup of every
   * client given it return VEIL_ERR_FAILED_PRECONDITION. A server can make a lookup fail because
   * of the row asked for; give every client of the app the same path in its private storage, so
   * that such a server learns one bit per installation, not one per client. Its folder must
   * exist and take new files (else connecting is VEIL_ERR_INVALID_ARGUMENT). Remove the file once
   * the failure is reported and the deployment fixed. NULL: none. */
  const char* failure_latch_file;
} veil_client_options;

#define VEIL_NO_BAG_PADDING 0xFFFFFFFFu

typedef struct veil_table_info {
  uint64_t rows;
  uint32_t dim;       /* floats per row returned by veil_lookup */
  uint32_t row_words; /* 32-bit words per row returned by veil_lookup_words */
  int32_t row_format; /* VEIL_FORMAT_* */
  int32_t frac_bits;  /* VEIL_FORMAT_FIXED: value = int32 / 2^frac_bits */
  uint64_t epoch;
  uint8_t digest[32]; /* BLAKE2b-256 of the table; both servers reported it */
} veil_table_info;

/* Rows [first_row, first_row + rows) of the served table (e.g. a batch-PIR bin). */
typedef struct veil_row_range {
  uint64_t first_row;
  uint64_t rows;
} veil_row_range;

typedef struct veil_call_stats {
  uint64_t bytes_up; /* both servers, RPC framing included */
  uint64_t bytes_down;
  double latency_ms;
  uint32_t lookups; /* rows or bags returned */
  uint32_t keys;    /* keys sent to each server */
} veil_call_stats;

/* VEIL_ABI_VERSION of the library actually linked. */
int veil_abi_version(void);

/* Connects to both servers and checks that they serve the same table. On success *out_client
 * holds a new client (close it with veil_client_close); on failure it is set to NULL.
 * TLS failures: VEIL_ERR_NOT_FOUND if tls_trusted_certs cannot be found, VEIL_ERR_INVALID_ARGUMENT
 * if it holds no certificate, VEIL_ERR_FAILED_PRECONDITION if a server's certificate is not
 * trusted or not for its name (or, without TLS, a server is not on loopback),
 * VEIL_ERR_UNAVAILABLE if one side speaks TLS and the other does not. */
int veil_client_connect(const veil_client_options* options, veil_client** out_client);

/* Closes the connections and frees the client. NULL is ignored. */
void veil_client_close(veil_client* client);

int veil_client_table_info(const veil_client* client, veil_table_info* out_info);

/* Rows `indices[0..count)`, dequantized to floats: out must hold count * dim floats
 * (out_len >= count * dim). */
int veil_lookup(veil_client* client, const uint64_t* indices, size_t count, float* out,
                size_t out_len);

/* The same rows as stored (bit-exact words): out_len >= count * row_words. */
int veil_lookup_words(veil_client* client, const uint64_t* indices, size_t count, uint32_t* out,
                      size_t out_len);

/* Range lookups, one range per index: entry i is row ranges[i].first_row + indices[i] of the
 * table, so indices[i] counts from the start of its range and must be < ranges[i].rows. Each key
 * is built over its range only, so the upload and the servers' work follow the range's size, not
 * the table's; the servers learn each key's range, never the row within it. Rows come back as
 * veil_lookup returns them: out_len >= count * dim floats.
 * Returns VEIL_ERR_INVALID_ARGUMENT for count 0, a range that is empty or not inside the table,
 * or an index >= its range's rows; VEIL_ERR_FAILED_PRECONDITION if a server does not answer range
 * queries (an older server version: use veil_lookup); otherwise what veil_lookup returns. */
int veil_lookup_in_ranges(veil_client* client, const uint64_t* indices,
                          const veil_row_range* ranges, size_t count, float* out, size_t out_len);

/* The same rows as stored (bit-exact words): out_len >= count * row_words. */
int veil_lookup_words_in_ranges(veil_client* client, const uint64_t* indices,
                                const veil_row_range* ranges, size_t count, uint32_t* out,
                                size_t out_len);

/* A batch-PIR layout file (veil-codesign layout --out=FILE): which rows are hot, how the tables
 * are split into bins, which rows are stored together. It is public: ship it with the app. On
 * success *out_layout holds it (close it with veil_layout_close); on failure it is set to NULL.
 * Returns VEIL_ERR_NOT_FOUND if the file cannot be opened, VEIL_ERR_INVALID_ARGUMENT if it is not
 * a valid layout file, VEIL_ERR_RESOURCE_EXHAUSTED if its rows would need more than 1 GiB of
 * memory (refused before allocating). */
int veil_layout_open(const char* path, veil_layout** out_layout);

/* Frees a layout. NULL is ignored. */
void veil_layout_close(veil_layout* layout);

typedef struct veil_layout_info {
  uint32_t rows;       /* rows of the table the layout arranges */
  uint32_t row_values; /* floats per row returned by veil_lookup_layout */
  uint32_t keys;       /* keys sent to each server per veil_lookup_layout, whatever is wanted */
} veil_layout_info;

int veil_layout_get_info(const veil_layout* layout, veil_layout_info* out_info);

/* Layout lookup: the rows rows[0..count) of the table `layout` arranges (any order, duplicates
 * allowed), fetched as one inference from servers that serve the layout's physical table. Every
 * bin gets its constant number of keys, whatever is wanted, so the servers learn nothing from
 * counts. out holds count * row_values floats: rows[i]'s values at i * row_values. A row whose
 * bin's keys were all taken by other wanted rows is not fetched: missing[i] is set to 1 and its
 * values to 0 (never another row's); otherwise missing[i] is 0. missing_len >= count.
 * Returns VEIL_ERR_INVALID_ARGUMENT for a row out of range or short buffers,
 * VEIL_ERR_FAILED_PRECONDITION if the servers' table is not the layout's physical table, and
 * otherwise what veil_lookup_in_ranges returns. */
int veil_lookup_layout(veil_client* client, const veil_layout* layout, const int32_t* rows,
                       size_t count, float* out, size_t out_len, uint8_t* missing,
                       size_t missing_len);

/* Pooled lookups on a VEIL_FORMAT_FIXED table: bag b is the next bag_sizes[b] entries of
 * `indices` (the sizes add up to count); weights is NULL (all 1) or count int32 weights; mode is
 * VEIL_POOL_SUM or VEIL_POOL_MEAN. out_len >= bag_count * dim. With a row key the servers answer
 * every key's row, each row's tag is checked (VEIL_ERR_DATA_LOSS if one fails) and the bags are
 * summed here: sums cannot carry tags. */
int veil_lookup_pooled(veil_client* client, const uint64_t* indices, size_t count,
                       const uint32_t* bag_sizes, size_t bag_count, const int32_t* weights,
                       int mode, float* out, size_t out_len);

/* The cost of this client's last successful lookup. */
int veil_last_call_stats(const veil_client* client, veil_call_stats* out_stats);

/* Since this client connected: calls sent again to another replica after a failure
 * (*out_failovers) and calls also sent to another replica because the first was slow
 * (*out_hedges); see server0. Either pointer may be NULL. */
int veil_replica_stats(const veil_client* client, uint64_t* out_failovers, uint64_t* out_hedges);

/* The message of the last error on this thread ("" if none). Valid until the next veil call on
 * this thread. */
const char* veil_last_error(void);

/* A constant name for a return code: "OK", "INVALID_ARGUMENT", ... */
const char* veil_status_name(int code);

/* ---- Protocol bfv-bag: private pooled lookups from ONE server (BFV homomorphic encryption). ----
 * The client encrypts each bag's weights over the whole table under its own key; the server
 * returns the encrypted pooled row, which only the client can decrypt. The server learns nothing
 * of the bag (rows, size or weights) and no second server is needed; each bag costs one query
 * ciphertext per 8192 rows up (~142 KiB) and one compressed ciphertext down (~139 KiB), and
 * connecting uploads the session's Galois keys (megabytes; veil_bag_client_table_info). The sums
 * are exact integers over the fixed-point rows. Errors and threading as for veil_client. */

typedef struct veil_bag_client veil_bag_client;

/* Zero it (memset) and set struct_size = sizeof(veil_bag_client_options) before setting fields:
 * a zero field means its default. */
typedef struct veil_bag_client_options {
  uint32_t struct_size;          /* sizeof(veil_bag_client_options) as the app was compiled */
  const char* server;            /* "HOST:PORT" of the bfv-bag server, or its replicas "H:P,H:P" */
  uint32_t timeout_ms;           /* connecting (key upload included) and each lookup; 0: 30000 */
  const char* tls_trusted_certs; /* as in veil_client_options; NULL: no TLS (loopback only) */
  const char* tls_server_name;   /* the name the server's certificate must hold; NULL: its HOST */
  /* Version 8: the table's row key file (veil table build --row-tag-kind=4 writes TABLE.rowkey):
   * with it every pooled sum is checked against the table's linear MAC, and a sum that fails is
   * VEIL_ERR_DATA_LOSS, never returned. Required when the server's table carries tags; with it an
   * untagged table is refused (VEIL_ERR_FAILED_PRECONDITION). NULL: none. */
  const char* row_key_file;
  /* Version 8: the oldest table version (epoch) to accept, as in veil_client_options. 0: any. */
  uint64_t min_epoch;
  /* Version 9: as in veil_client_options; every failed answer (its tag, its decryption or its
   * decoding) writes it. Without it the client stops alone after a failed answer. NULL: none. */
  const char* failure_latch_file;
  /* Version 10: the threads that encrypt and serialize a lookup's queries (at 2^20 rows a bag's
   * query takes a core ~0.17 s). 0: as many as the device has cores; negative or above 2^31 - 1
   * is refused. 64 bits so that the struct grows on every ABI (on 32-bit ARM a 32-bit field
   * would fill version 9's tail padding and leave its size, and so the version check, alone). */
  int64_t threads;
} veil_bag_client_options;

typedef struct veil_bag_table_info {
  uint64_t rows;
  uint32_t dim;      /* values per pooled row */
  int32_t frac_bits; /* value = int32 / 2^frac_bits */
  uint64_t epoch;
  uint8_t digest[32];        /* BLAKE2b-256 of the table */
  uint64_t query_bytes;      /* up, per bag */
  uint64_t answer_bytes;     /* down, per bag */
  uint64_t galois_key_bytes; /* up, once per session */
} veil_bag_table_info;

/* Connects, generates this session's keys and uploads the Galois keys. On success *out_client
 * holds a new client (close it with veil_bag_client_close); on failure it is set to NULL.
 * VEIL_ERR_FAILED_PRECONDITION for a server of another protocol (a dpf2 server: "speaks
 * protocol") and the TLS failures of veil_client_connect; VEIL_ERR_RESOURCE_EXHAUSTED if the
 * server's memory for keys is held by other sessions' keys in use. */
int veil_bag_client_connect(const veil_bag_client_options* options, veil_bag_client** out_client);

/* Closes the connection, wipes the secret key and frees the client. NULL is ignored. */
void veil_bag_client_close(veil_bag_client* client);

int veil_bag_client_table_info(const veil_bag_client* client, veil_bag_table_info* out_info);

/* Pooled lookups: bag b is the next bag_sizes[b] entries of `indices` (the sizes add up to count;
 * repeated rows add up); weights is NULL (all 1) or count int64 weights; mode is VEIL_POOL_SUM or
 * VEIL_POOL_MEAN (divides by the bag's weight sum). out_len >= bag_count * dim floats.
 * VEIL_ERR_INVALID_ARGUMENT also for weights too large for an exact sum. */
int veil_bag_lookup_pooled(veil_bag_client* client, const uint64_t* indices, size_t count,
                           const uint32_t* bag_sizes, size_t bag_count, const int64_t* weights,
                           int mode, float* out, size_t out_len);

/* The exact sums (fixed-point integers times weights): out_len >= bag_count * dim. */
int veil_bag_lookup_pooled_sums(veil_bag_client* client, const uint64_t* indices, size_t count,
                                const uint32_t* bag_sizes, size_t bag_count, const int64_t* weights,
                                int64_t* out, size_t out_len);

/* The cost of this client's last successful lookup (keys: query ciphertexts sent). */
int veil_bag_last_call_stats(const veil_bag_client* client, veil_call_stats* out_stats);

/* ---- Protocols lwe-simple, lwe-double, lwe-exppack-s, lwe-exppack-d and lwe-hybrid: private row
 * lookups from ONE server (LWE PIR). ----
 * Connecting downloads the table's hint once (megabytes; veil_lwe_table_info.hint_bytes), or reads
 * it from hint_cache_dir, where it is kept per table version. Each row then costs one query up
 * and one answer down (query_bytes, answer_bytes), encrypted under a fresh secret that never
 * leaves the client: the server learns nothing about the row. lwe-double (DoublePIR) has a much
 * smaller hint than lwe-simple (SimplePIR) and larger answers. Rows come back bit-exact; with the
 * table's row key every row's authentication tag is checked (VEIL_ERR_DATA_LOSS, never a wrong
 * row). lwe-exppack-s has no hint: connecting uploads the client's expansion keys (3.4 MiB,
 * public) instead, once per connection (a reconnection resumes them with the server's 16-byte
 * token while the server still holds them), and each row costs a query plus one RLWE ciphertext up
 * (query_bytes) and a packed response down (answer_bytes; hint_bytes is 0). lwe-hybrid is
 * lwe-exppack-s whose rows also send one RLWE ciphertext selecting their window (48 KiB more up,
 * less down on tables of several packed ciphertexts per column); lwe-exppack-d packs DoublePIR's
 * answers (one RLWE ciphertext up per row byte: for rows of a few bytes); lwe-double-pack folds
 * lwe-exppack-s's answer with a second query and packs it again (8 ciphertexts down). Errors and
 * threading as for veil_client (ABI 5). */
typedef struct veil_lwe_client veil_lwe_client;

/* Zero it (memset) and set struct_size = sizeof(veil_lwe_client_options) before setting fields:
 * a zero field means its default. */
typedef struct veil_lwe_client_options {
  uint32_t struct_size;          /* sizeof(veil_lwe_client_options) as the app was compiled */
  const char* server;            /* "HOST:PORT" of the LWE server, or its replicas "H:P,H:P" */
  const char* protocol;          /* "lwe-simple" (NULL), "lwe-double", "lwe-exppack-s",
                                    "lwe-exppack-d", "lwe-hybrid" or "lwe-double-pack" */
  uint32_t timeout_ms;           /* connecting (hint included) and each lookup; 0: 30000 */
  const char* tls_trusted_certs; /* as in veil_client_options; NULL: no TLS (loopback only) */
  const char* tls_server_name;   /* the name the server's certificate must hold; NULL: its HOST */
  const char* row_key_file;      /* the table's row key file; required for tagged tables, and
                                    with it an untagged table is refused */
  const char* hint_cache_dir;    /* folder keeping downloaded hints; NULL: download every time */
  uint64_t min_epoch; /* version 6: the oldest table epoch accepted, as in veil_client_options */
  const char* failure_latch_file; /* version 9: as in veil_client_options; NULL: none */
} veil_lwe_client_options;

typedef struct veil_lwe_table_info {
  uint64_t rows;
  uint32_t dim;       /* floats per row returned by veil_lwe_lookup */
  uint32_t row_words; /* 32-bit words per row returned by veil_lwe_lookup_words */
  int32_t row_format; /* VEIL_FORMAT_* */
  int32_t frac_bits;  /* VEIL_FORMAT_FIXED: value = int32 / 2^frac_bits */
  uint64_t epoch;
  uint8_t digest[32];      /* BLAKE2b-256 of the table */
  uint64_t hint_bytes;     /* down, once per table version */
  uint64_t query_bytes;    /* up, per row */
  uint64_t answer_bytes;   /* down, per row */
  int32_t hint_from_cache; /* 1 if veil_lwe_client_connect found the hint in hint_cache_dir */
} veil_lwe_table_info;

/* Connects, checks the server's parameters and gets the hint. On success *out_client holds a new
 * client (close it with veil_lwe_client_close); on failure it is set to NULL.
 * VEIL_ERR_INVALID_ARGUMENT for an unknown protocol; VEIL_ERR_FAILED_PRECONDITION for a server of
 * another protocol ("speaks protocol"), parameters this client refuses, a tagged table without
 * row_key_file, and the TLS failures of veil_client_connect. */
int veil_lwe_client_connect(const veil_lwe_client_options* options, veil_lwe_client** out_client);
/* Closes the connection and frees the client. NULL is ignored. */
void veil_lwe_client_close(veil_lwe_client* client);
int veil_lwe_client_table_info(const veil_lwe_client* client, veil_lwe_table_info* out_info);
/* Rows `indices[0..count)`, dequantized: out_len >= count * dim floats. VEIL_ERR_DATA_LOSS if a
 * row fails its authentication tag. */
int veil_lwe_lookup(veil_lwe_client* client, const uint64_t* indices, size_t count, float* out,
                    size_t out_len);
/* The same rows as stored (bit-exact words): out_len >= count * row_words. */
int veil_lwe_lookup_words(veil_lwe_client* client, const uint64_t* indices, size_t count,
                          uint32_t* out, size_t out_len);
/* The cost of this client's last successful lookup (keys: queries sent). */
int veil_lwe_last_call_stats(const veil_lwe_client* client, veil_call_stats* out_stats);
/* ABI 7: makes the row-free part of `count` queries now (nearly all of a query's client work)
 * and keeps them for the next lookups, which then only add their rows: call it while the app is
 * idle (another thread may look rows up meanwhile). Each serves one row, once. *out_prepared (if
 * not NULL) receives the prepared queries held afterwards. VEIL_ERR_INVALID_ARGUMENT beyond
 * 64 MiB of prepared queries. */
int veil_lwe_prepare_queries(veil_lwe_client* client, uint32_t count, uint64_t* out_prepared);

#ifdef __cplusplus
}
#endif

#endif /* VEIL_MOBILE_CLIENT_VEIL_H_ */
