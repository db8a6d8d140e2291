#include "tools/table_cli.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "embedding/row_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"

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

// The arguments after the subcommand: --name=value flags and positional operands.
struct ParsedArgs {
  std::map<std::string, std::string, std::less<>> flags;
  std::vector<std::string> operands;
};

absl::StatusOr<ParsedArgs> ParseArgs(absl::Span<const std::string> args,
                                     absl::Span<const absl::string_view> known_flags) {
  ParsedArgs parsed;
  for (const std::string& arg : args) {
    absl::string_view rest = arg;
    if (!absl::ConsumePrefix(&rest, "--")) {
      parsed.operands.push_back(arg);
      continue;
    }
    const size_t equals = rest.find('=');
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", arg, " needs a value (--name=value)"));
    }
    const absl::string_view name = rest.substr(0, equals);
    if (std::find(known_flags.begin(), known_flags.end(), name) == known_flags.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    parsed.flags[std::string(name)] = std::string(rest.substr(equals + 1));
  }
  return parsed;
}

// Reads an integer flag, leaving `value` unchanged when the flag is absent.
template <typename Int>
absl::Status IntFlag(const ParsedArgs& args, absl::string_view name, Int& value) {
  const auto it = args.flags.find(name);
  if (it == args.flags.end()) return absl::OkStatus();
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", it->second, " is not a valid number"));
  }
  return absl::OkStatus();
}

std::string Usage(absl::string_view program) {
  return absl::StrCat("usage:\n  ", program,
                      " build (--csv=FILE | --f32=FILE) --dim=D --format=fp32|fp16|int8|fixed\n"
                      "        [--frac-bits=16] [--epoch=N] --out=FILE\n  ",
                      program, " inspect FILE [--rows=N]\n  ", program, " verify FILE\n");
}

// A usage error: the message, then the usage text.
int UsageError(absl::string_view program, absl::string_view message, std::ostream& err) {
  err << program << ": " << message << "\n" << Usage(program);
  return kUsage;
}

int Build(absl::string_view program, absl::Span<const std::string> args, std::ostream& out,
          std::ostream& err) {
  static constexpr absl::string_view kFlags[] = {"csv",       "f32",   "dim", "format",
                                                 "frac-bits", "epoch", "out"};
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) return UsageError(program, parsed.status().message(), err);
  if (!parsed->operands.empty()) {
    return UsageError(program, absl::StrCat("unexpected operand ", parsed->operands[0]), err);
  }
  const auto& flags = parsed->flags;
  const bool csv = flags.contains("csv");
  if (csv == flags.contains("f32")) {
    return UsageError(program, "build needs exactly one of --csv and --f32", err);
  }
  if (!flags.contains("format") || !flags.contains("out")) {
    return UsageError(program, "build needs --format and --out", err);
  }
  if (!csv && !flags.contains("dim")) return UsageError(program, "--f32 needs --dim", err);
  absl::StatusOr<RowFormat> format = ParseRowFormat(flags.at("format"));
  if (!format.ok()) return UsageError(program, format.status().message(), err);
  uint32_t dim = 0;
  TableOptions options;
  for (absl::Status status :
       {IntFlag(*parsed, "dim", dim), IntFlag(*parsed, "epoch", options.epoch),
        IntFlag(*parsed, "frac-bits", options.frac_bits)}) {
    if (!status.ok()) return UsageError(program, status.message(), err);
  }

  const std::string& out_path = flags.at("out");
  const absl::Status status =
      csv ? WriteTableFromCsv(flags.at("csv"), out_path, *format, dim, options)
          : WriteTableFromF32File(flags.at("f32"), out_path, *format, dim, options);
  if (!status.ok()) {
    err << program << ": build failed: " << status << "\n";
    return kFailed;
  }
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Open(out_path);
  if (!table.ok()) {
    err << program << ": cannot reopen " << out_path << ": " << table.status() << "\n";
    return kFailed;
  }
  out << "wrote " << out_path << ": " << (*table)->rows() << " rows, dim " << (*table)->dim()
      << ", " << RowFormatName((*table)->format()) << ", digest " << (*table)->DigestHex() << "\n";
  return kOk;
}

int Inspect(absl::string_view program, absl::Span<const std::string> args, std::ostream& out,
            std::ostream& err) {
  static constexpr absl::string_view kFlags[] = {"rows"};
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) return UsageError(program, parsed.status().message(), err);
  if (parsed->operands.size() != 1) return UsageError(program, "inspect needs one FILE", err);
  uint64_t rows_shown = 3;
  if (absl::Status status = IntFlag(*parsed, "rows", rows_shown); !status.ok()) {
    return UsageError(program, status.message(), err);
  }
  absl::StatusOr<std::unique_ptr<Table>> opened = Table::Open(parsed->operands[0]);
  if (!opened.ok()) {
    err << program << ": " << opened.status() << "\n";
    return kFailed;
  }
  const Table& table = **opened;
  const TableHeader& header = table.header();
  out << "file:         " << parsed->operands[0] << "\n"
      << "version:      " << header.version << "\n"
      << "rows:         " << table.rows() << "\n"
      << "dim:          " << table.dim() << "\n"
      << "format:       " << RowFormatName(table.format()) << "\n"
      << "row_words:    " << table.row_words() << "\n"
      << "stride_words: " << table.stride_words() << "\n"
      << "frac_bits:    " << table.frac_bits() << "\n"
      << "epoch:        " << table.epoch() << "\n"
      << "digest:       " << table.DigestHex() << " (not recomputed; see verify)\n";
  std::vector<float> values(table.dim());
  const uint32_t shown_values = std::min(table.dim(), kInspectValuesPerRow);
  for (uint64_t i = 0; i < std::min(rows_shown, table.rows()); ++i) {
    if (absl::Status status = table.DecodeRow(i, absl::MakeSpan(values)); !status.ok()) {
      err << program << ": row " << i << ": " << status << "\n";
      return kFailed;
    }
    out << "row " << i << ": " << absl::StrJoin(values.begin(), values.begin() + shown_values, " ")
        << (shown_values < table.dim() ? " ..." : "") << "\n";
  }
  return kOk;
}

int Verify(absl::string_view program, absl::Span<const std::string> args, std::ostream& out,
           std::ostream& err) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return UsageError(program, parsed.status().message(), err);
  if (parsed->operands.size() != 1) return UsageError(program, "verify needs one FILE", err);
  absl::StatusOr<std::unique_ptr<Table>> opened = Table::Open(parsed->operands[0]);
  absl::Status status = opened.ok() ? (*opened)->Verify() : opened.status();
  if (!status.ok()) {
    err << program << ": " << parsed->operands[0] << ": " << status << "\n";
    return kFailed;
  }
  out << parsed->operands[0] << ": OK, digest " << (*opened)->DigestHex() << "\n";
  return kOk;
}

}  // namespace

int RunTableCli(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  const std::string program = args.empty() ? "table" : args[0];
  if (args.size() < 2) return UsageError(program, "missing subcommand", err);
  const std::string& command = args[1];
  const absl::Span<const std::string> rest = args.subspan(2);
  if (command == "build") return Build(program, rest, out, err);
  if (command == "inspect") return Inspect(program, rest, out, err);
  if (command == "verify") return Verify(program, rest, out, err);
  return UsageError(program, absl::StrCat("unknown subcommand '", command, "'"), err);
}

int RunTableCli(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  return RunTableCli(args, std::cout, std::cerr);
}

}  // namespace veil::tools
