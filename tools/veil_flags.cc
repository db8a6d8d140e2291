#include "tools/veil_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, protocol, "dpf2",
          "lookup: dpf2 (two servers, --server0 and --server1), bfv-bag (one BFV server, --server) "
          "or lwe-simple / lwe-double / lwe-exppack-s / lwe-exppack-d / lwe-hybrid / "
          "lwe-double-pack (one LWE PIR server, --server)");
ABSL_FLAG(std::string, server, "",
          "lookup: HOST:PORT of the single server (bfv-bag, lwe-simple, lwe-double, "
          "lwe-exppack-s, lwe-exppack-d, lwe-hybrid, lwe-double-pack), or its replicas "
          "HOST:PORT,HOST:PORT");
ABSL_FLAG(
    std::string, hint_cache, "",
    "lookup (lwe-simple, lwe-double): folder keeping downloaded hints, one per table version");
ABSL_FLAG(std::string, server0, "",
          "lookup: HOST:PORT of party 0, or its replicas HOST:PORT,HOST:PORT,...");
ABSL_FLAG(std::string, server1, "",
          "lookup: HOST:PORT of party 1, or its replicas HOST:PORT,HOST:PORT,...");
ABSL_FLAG(std::string, bags, "",
          "lookup: pooled lookup of a fixed-point table: the bag sizes N,M,... over --rows");
ABSL_FLAG(std::string, mode, "sum", "lookup: pooling of --bags: sum or mean");
ABSL_FLAG(std::string, weights, "",
          "lookup: one integer weight per row of --rows for --bags (hidden from the servers)");
ABSL_FLAG(bool, words, false,
          "lookup: print the rows as stored (hex words), not dequantized; bfv-bag: the exact "
          "fixed-point sums");
ABSL_FLAG(std::string, tls_certs, "",
          "lookup: PEM file of the certificates to trust (TLS); empty: plaintext (loopback only)");
ABSL_FLAG(std::string, tls_name0, "", "lookup: the name server 0's certificate must hold");
ABSL_FLAG(std::string, tls_name1, "", "lookup: the name server 1's certificate must hold");
ABSL_FLAG(bool, allow_plaintext, false, "lookup: allow plaintext to a non-loopback server");
ABSL_FLAG(int64_t, timeout_ms, 0,
          "lookup: bound on connecting and on the lookup (0: 5000, bfv-bag 30000)");
ABSL_FLAG(std::string, prg, "aes128", "lookup: aes128, chacha8, chacha12, chacha20 or siphash");
ABSL_FLAG(std::string, rows, "",
          "lookup: the rows to fetch, I,J,...; table inspect: how many rows to show (3)");
ABSL_FLAG(std::string, csv, "", "table build: input CSV, one row of values per line");
ABSL_FLAG(std::string, f32, "", "table build: input of raw little-endian float32 values");
ABSL_FLAG(uint32_t, dim, 0, "table build: values per row (0: from the CSV's first row)");
ABSL_FLAG(std::string, format, "", "table build: fp32, fp16, int8 or fixed");
ABSL_FLAG(int, frac_bits, 16, "table build: fractional bits of fixed-point rows");
ABSL_FLAG(uint64_t, epoch, 0, "table build: the table's version counter");
ABSL_FLAG(std::string, out, "", "table build: the table file to write");
ABSL_FLAG(bool, row_tags, true,
          "table build: end every row with an authentication tag under a new key (written to "
          "--row-key) that clients check; servers never need the key");
ABSL_FLAG(std::string, row_key, "",
          "table build: where the tag key goes (default OUT.rowkey, mode 0600); lookup: the "
          "table's key file, to check every fetched row");
ABSL_FLAG(uint64_t, min_epoch, 0,
          "lookup: the oldest table version (epoch) to accept; servers that serve only older "
          "ones are refused");
ABSL_FLAG(std::string, failure_latch, "",
          "lookup: a file that an answer failing its check writes (mobile_client/failure_latch.h): "
          "while it exists no lookup is made; empty: none");
ABSL_FLAG(int, row_tag_kind, 3,
          "table build: the tags' kind: 3 covers the epoch, the row and how its words are read; 4 "
          "covers the same with a linear MAC, whose pooled sums bfv-bag clients can check too "
          "(bags' weights then sum to at most 2^26 in absolute value); 2 (tables built before "
          "kind 3) only for a new version of a table served with kind 2, since a rolling update "
          "keeps the kind (restart the servers to move to 3 or 4)");
ABSL_FLAG(std::string, reuse_row_key, "",
          "table build: tag rows under the key in this file instead of a new one, for a new "
          "version (--epoch) of a table whose clients hold that key (a rolling update)");
ABSL_FLAG(std::string, out_dir, "", "tls-cert: the folder for server.pem and server.key");
ABSL_FLAG(std::string, hosts, "127.0.0.1,::1,localhost",
          "tls-cert: DNS names and IP addresses the certificate is for");
ABSL_FLAG(int64_t, days, 365, "tls-cert: validity in days");
