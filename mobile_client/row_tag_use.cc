#include "mobile_client/row_tag_use.h"

#include "absl/strings/str_cat.h"

namespace veil::client {

absl::StatusOr<std::optional<embedding::RowKey>> ReadOptionalRowKey(
    const std::string& row_key_file) {
  if (row_key_file.empty()) return std::nullopt;
  absl::StatusOr<embedding::RowKey> key = embedding::ReadRowKeyFile(row_key_file);
  if (!key.ok()) return key.status();
  return *key;
}

absl::Status CheckRowTagUse(embedding::RowTag tag, bool has_key, uint64_t min_epoch,
                            absl::string_view whose) {
  if (tag != embedding::RowTag::kNone && !has_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        whose,
        " table carries row authentication tags, but this client has no row key to check them "
        "with: set row_key_file to the table's key file (veil table build writes TABLE.rowkey)"));
  }
  if (tag == embedding::RowTag::kNone && has_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        whose,
        " table carries no row authentication tags, but this client holds a row key: it expects "
        "the tagged table that key was made for and refuses to read rows it cannot check"));
  }
  if (tag == embedding::RowTag::kSipHash64 && min_epoch > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        whose,
        " table carries row tags that do not cover its epoch (built by an older veil table "
        "build), so min_epoch cannot be enforced: rebuild the table, or set min_epoch 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckMinEpoch(uint64_t epoch, uint64_t min_epoch, absl::string_view who) {
  if (epoch >= min_epoch) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      who, " serves table epoch ", epoch, ", older than the oldest this client accepts (min_epoch ",
      min_epoch, "): refusing it"));
}

}  // namespace veil::client
