#include "tools/table_cli.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "embedding/row_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "tools/veil_flags.h"

namespace veil::tools {
namespace {

using embedding::ParseRowFormat;
using embedding::RowFormat;
using embedding::RowFormatName;
using embedding::Table;
using embedding::TableHeader;
using embedding::TableOptions;
using embedding::WriteTableFromCsv;
using embedding::WriteTableFromF32File;

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

// Values shown per row by inspect: enough to recognise a row, short enough for a terminal line.
constexpr uint32_t kInspectValuesPerRow = 8;

// A usage error: the message, then the usage text.
int UsageError(absl::string_view message, std::ostream& err) {
  err << "veil table: " << message << "\n" << kTableUsage;
  return kUsage;
}

// Kind 4's tags are a linear MAC: two different tables of one epoch under one key would reveal
// sums of its secret weights, and with enough of them every tag of that epoch could be forged. So
// the epochs built with a key under kind 4 are listed next to it (KEY.epochs), and an epoch is
// built once (veil table build refuses it again under --reuse-row-key). Returns whether `epoch`
// is listed in `path` (a missing file lists none).
absl::StatusOr<bool> EpochListed(const std::string& path, uint64_t epoch) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipWhitespace())) {
    uint64_t listed = 0;
    if (!absl::SimpleAtoi(line, &listed)) {
      return absl::InvalidArgumentError(absl::StrCat(path, " holds \"", line, "\", not an epoch"));
    }
    if (listed == epoch) return true;
  }
  return false;
}

int Build(absl::Span<const std::string> operands, std::ostream& out, std::ostream& err) {
  if (!operands.empty()) return UsageError(absl::StrCat("unexpected operand ", operands[0]), err);
  const std::string csv = absl::GetFlag(FLAGS_csv), f32 = absl::GetFlag(FLAGS_f32);
  const std::string format_name = absl::GetFlag(FLAGS_format);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  const uint32_t dim = absl::GetFlag(FLAGS_dim);
  if (csv.empty() == f32.empty())
    return UsageError("build needs exactly one of --csv and --f32", err);
  if (format_name.empty() || out_path.empty()) {
    return UsageError("build needs --format and --out", err);
  }
  if (!f32.empty() && dim == 0) return UsageError("--f32 needs --dim", err);
  absl::StatusOr<RowFormat> format = ParseRowFormat(format_name);
  if (!format.ok()) return UsageError(format.status().message(), err);
  TableOptions options;
  options.epoch = absl::GetFlag(FLAGS_epoch);
  options.frac_bits = absl::GetFlag(FLAGS_frac_bits);
  const int kind = absl::GetFlag(FLAGS_row_tag_kind);
  if (kind < 2 || kind > 4) return UsageError("--row-tag-kind is 3, 4, or 2", err);
  options.row_tag = static_cast<embedding::RowTag>(kind);
  std::string key_path;  // where a new key goes; empty when none is written
  const std::string reused = absl::GetFlag(FLAGS_reuse_row_key);
  if (!absl::GetFlag(FLAGS_row_tags)) {
    if (!absl::GetFlag(FLAGS_row_key).empty() || !reused.empty()) {
      return UsageError("--row-key and --reuse-row-key go with --row-tags", err);
    }
  } else if (!reused.empty()) {
    if (!absl::GetFlag(FLAGS_row_key).empty()) {
      return UsageError("give --row-key (a new key) or --reuse-row-key (an existing one)", err);
    }
    // A new version of a table keeps its key, so that clients check its rows with the key they
    // hold while servers roll from one version to the next.
    absl::StatusOr<embedding::RowKey> key = embedding::ReadRowKeyFile(reused);
    if (!key.ok()) {
      err << "veil table: --reuse-row-key: " << key.status() << "\n";
      return kFailed;
    }
    options.row_key = *key;
  } else {
    options.row_key = embedding::NewRowKey();
    key_path =
        absl::GetFlag(FLAGS_row_key).empty() ? out_path + ".rowkey" : absl::GetFlag(FLAGS_row_key);
  }
  // Where kind 4's epochs are listed: next to the key (a new key starts a new list).
  const std::string epochs_path =
      options.row_key && options.row_tag == embedding::RowTag::kLinearMac61
          ? (reused.empty() ? key_path : reused) + ".epochs"
          : "";
  if (!epochs_path.empty() && !reused.empty()) {
    absl::StatusOr<bool> listed = EpochListed(epochs_path, options.epoch);
    if (!listed.ok()) {
      err << "veil table: " << listed.status() << "\n";
      return kFailed;
    }
    if (*listed) {
      err << "veil table: epoch " << options.epoch << " was already built under this key ("
          << epochs_path << "): a table tagged with kind 4 (a linear MAC) needs a new --epoch for "
          << "each build, since two tables of one epoch under one key would let a server forge "
             "that epoch's tags\n";
      return kFailed;
    }
  }
  const absl::Status status = !csv.empty()
                                  ? WriteTableFromCsv(csv, out_path, *format, dim, options)
                                  : WriteTableFromF32File(f32, out_path, *format, dim, options);
  if (!status.ok()) {
    err << "veil table: build failed: " << status << "\n";
    return kFailed;
  }
  // The key after the table: a failed build leaves no key behind for a table that is not there.
  if (!key_path.empty()) {
    if (absl::Status written = embedding::WriteRowKeyFile(key_path, *options.row_key);
        !written.ok()) {
      err << "veil table: " << written << "\n";
      return kFailed;
    }
  }
  if (!epochs_path.empty() &&
      !(std::ofstream(epochs_path, reused.empty() ? std::ios::trunc : std::ios::app)
        << options.epoch << "\n")) {
    err << "veil table: cannot record epoch " << options.epoch << " in " << epochs_path << "\n";
    return kFailed;
  }
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(out_path);
  if (!table.ok()) {
    err << "veil table: cannot reopen " << out_path << ": " << table.status() << "\n";
    return kFailed;
  }
  out << "wrote " << out_path << ": " << (*table)->rows() << " rows, dim " << (*table)->dim()
      << ", " << RowFormatName((*table)->format()) << ", digest " << (*table)->DigestHex() << "\n";
  if (!key_path.empty()) {
    out << "row tags: on; their key is " << key_path
        << " (give it to clients, e.g. veil lookup --row-key=" << key_path
        << "; servers never need it)\n";
  } else if (options.row_key) {
    out << "row tags: on, under the existing key " << reused
        << " (clients holding it check this version's rows too)\n";
  }
  return kOk;
}

int Inspect(absl::Span<const std::string> operands, std::ostream& out, std::ostream& err) {
  if (operands.size() != 1) return UsageError("inspect needs one FILE", err);
  uint64_t rows_shown = 3;
  if (const std::string rows = absl::GetFlag(FLAGS_rows);
      !rows.empty() && !absl::SimpleAtoi(rows, &rows_shown)) {
    return UsageError(absl::StrCat("--rows=", rows, " is not a number"), err);
  }
  absl::StatusOr<std::unique_ptr<Table>> opened = Table::Open(operands[0]);
  if (!opened.ok()) {
    err << "veil table: " << opened.status() << "\n";
    return kFailed;
  }
  const Table& table = **opened;
  const TableHeader& header = table.header();
  out << "file:         " << operands[0] << "\n"
      << "version:      " << header.version << "\n"
      << "rows:         " << table.rows() << "\n"
      << "dim:          " << table.dim() << "\n"
      << "format:       " << RowFormatName(table.format()) << "\n"
      << "row_words:    " << table.row_words() << "\n"
      << "stride_words: " << table.stride_words() << "\n"
      << "frac_bits:    " << table.frac_bits() << "\n"
      << "epoch:        " << table.epoch() << "\n"
      << "row_tags:     " << embedding::RowTagName(table.row_tag()) << "\n"
      << "digest:       " << table.DigestHex() << " (not recomputed; see verify)\n";
  std::vector<float> values(table.dim());
  const uint32_t shown_values = std::min(table.dim(), kInspectValuesPerRow);
  for (uint64_t i = 0; i < std::min(rows_shown, table.rows()); ++i) {
    if (absl::Status status = table.DecodeRow(i, absl::MakeSpan(values)); !status.ok()) {
      err << "veil table: row " << i << ": " << status << "\n";
      return kFailed;
    }
    out << "row " << i << ": " << absl::StrJoin(values.begin(), values.begin() + shown_values, " ")
        << (shown_values < table.dim() ? " ..." : "") << "\n";
  }
  return kOk;
}

int Verify(absl::Span<const std::string> operands, std::ostream& out, std::ostream& err) {
  if (operands.size() != 1) return UsageError("verify needs one FILE", err);
  absl::StatusOr<std::unique_ptr<Table>> opened = Table::Open(operands[0]);
  absl::Status status = opened.ok() ? (*opened)->Verify() : opened.status();
  if (!status.ok()) {
    err << "veil table: " << operands[0] << ": " << status << "\n";
    return kFailed;
  }
  out << operands[0] << ": OK, digest " << (*opened)->DigestHex() << "\n";
  return kOk;
}

}  // namespace

const char kTableUsage[] =
    "usage:\n"
    "  veil table build (--csv=FILE | --f32=FILE) --dim=D --format=fp32|fp16|int8|fixed\n"
    "        [--frac-bits=16] [--epoch=N] [--row-tags=true] [--row-tag-kind=3]\n"
    "        [--row-key=OUT.rowkey | --reuse-row-key=OLD.rowkey] --out=FILE\n"
    "      --dim may be left out for CSV input (taken from the first row). A new version of a\n"
    "      served table (rolling update): a larger --epoch, the same shape, and\n"
    "      --reuse-row-key=the key its clients hold (and --row-tag-kind=2 if the served table's\n"
    "      tags are of kind 2: veil table inspect says). --row-tag-kind=4 (a linear MAC) for a\n"
    "      fixed table served by bfv-bag: its clients check pooled sums too.\n"
    "  veil table inspect FILE [--rows=N]\n"
    "      Header fields, the digest (not recomputed) and the first N rows dequantized.\n"
    "  veil table verify FILE\n"
    "      Validates the header and recomputes the digest.\n"
    "example:\n"
    "  veil table build --csv=rows.csv --format=fixed --out=t.veil && veil table verify t.veil\n";

int RunTableCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  if (args.empty()) return UsageError("missing subcommand", err);
  const std::string& command = args[0];
  const absl::Span<const std::string> operands = args.subspan(1);
  if (command == "build") return Build(operands, out, err);
  if (command == "inspect") return Inspect(operands, out, err);
  if (command == "verify") return Verify(operands, out, err);
  return UsageError(absl::StrCat("unknown subcommand '", command, "'"), err);
}

}  // namespace veil::tools
