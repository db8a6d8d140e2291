// The flags of the `veil` command, one set for all its subcommands (lookup, table, tls-cert);
// each subcommand refuses flags that are not its own (tools/flags.h, CheckFlags).
#ifndef VEIL_TOOLS_VEIL_FLAGS_H_
#define VEIL_TOOLS_VEIL_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

// lookup
ABSL_DECLARE_FLAG(std::string, protocol);
ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(std::string, hint_cache);
ABSL_DECLARE_FLAG(std::string, server0);
ABSL_DECLARE_FLAG(std::string, server1);
ABSL_DECLARE_FLAG(std::string, bags);
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(std::string, weights);
ABSL_DECLARE_FLAG(std::string, failure_latch);
ABSL_DECLARE_FLAG(bool, words);
ABSL_DECLARE_FLAG(std::string, tls_certs);
ABSL_DECLARE_FLAG(std::string, tls_name0);
ABSL_DECLARE_FLAG(std::string, tls_name1);
ABSL_DECLARE_FLAG(bool, allow_plaintext);
ABSL_DECLARE_FLAG(int64_t, timeout_ms);
ABSL_DECLARE_FLAG(std::string, prg);
// lookup and table inspect
ABSL_DECLARE_FLAG(std::string, rows);
// table build
ABSL_DECLARE_FLAG(std::string, csv);
ABSL_DECLARE_FLAG(std::string, f32);
ABSL_DECLARE_FLAG(uint32_t, dim);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(int, frac_bits);
ABSL_DECLARE_FLAG(uint64_t, epoch);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, row_tags);
// lookup: the key of tagged rows; table build: where the new key goes (default OUT.rowkey)
ABSL_DECLARE_FLAG(std::string, row_key);
// lookup: the oldest table version accepted
ABSL_DECLARE_FLAG(uint64_t, min_epoch);
// table build: an existing key to tag rows under (a new table version for the same clients)
ABSL_DECLARE_FLAG(std::string, reuse_row_key);
ABSL_DECLARE_FLAG(int, row_tag_kind);
// tls-cert
ABSL_DECLARE_FLAG(std::string, out_dir);
ABSL_DECLARE_FLAG(std::string, hosts);
ABSL_DECLARE_FLAG(int64_t, days);

#endif  // VEIL_TOOLS_VEIL_FLAGS_H_
