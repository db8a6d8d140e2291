// How a client treats the row authentication tags a table carries (embedding/row_tag.h): the
// rules both the two-server client (share_exchange_config.cc) and the single-server one
// (lwe_client.cc) apply before they read a row.
#ifndef VEIL_MOBILE_CLIENT_ROW_TAG_USE_H_
#define VEIL_MOBILE_CLIENT_ROW_TAG_USE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "embedding/row_tag.h"

namespace veil::client {

// The key in `row_key_file`, or none where the path is empty. Returns ReadRowKeyFile's errors.
absl::StatusOr<std::optional<embedding::RowKey>> ReadOptionalRowKey(
    const std::string& row_key_file);

// FAILED_PRECONDITION where the client cannot check the rows of `whose` table ("the servers'",
// or a host's) as it must: the table is tagged and the client has no key; the client has a key
// and the table is untagged (a server could else switch the check off by serving an untagged
// table); or the tags do not cover the epoch (kind 1) while min_epoch > 0 (they would pass an
// older version's rows relabelled with a newer epoch).
absl::Status CheckRowTagUse(embedding::RowTag tag, bool has_key, uint64_t min_epoch,
                            absl::string_view whose);

// FAILED_PRECONDITION naming `who` (a single server) if the table epoch it serves is older than
// min_epoch.
absl::Status CheckMinEpoch(uint64_t epoch, uint64_t min_epoch, absl::string_view who);

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_ROW_TAG_USE_H_
