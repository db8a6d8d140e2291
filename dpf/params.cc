#include "dpf/params.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace veil::dpf {

absl::Status ValidateParameters(const DpfParameters& params) {
  if (params.log_domain < 1 || params.log_domain > kMaxLogDomain) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "log domain %d out of range [1, %d]", params.log_domain, kMaxLogDomain));
  }
  switch (params.prg) {
    case Prg::kAes128:
    case Prg::kChaCha8:
    case Prg::kChaCha12:
    case Prg::kChaCha20:
    case Prg::kSipHash:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown PRG id %d", static_cast<int>(params.prg)));
  }
  if (params.output == OutputType::kAdditive) {
    if (params.leaf_words_log2 < 0 || params.leaf_words_log2 > kMaxLeafWordsLog2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "leaf words log2 %d out of range [0, %d]", params.leaf_words_log2, kMaxLeafWordsLog2));
    }
  } else if (params.output != OutputType::kXor) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown output type %d", static_cast<int>(params.output)));
  }
  return absl::OkStatus();
}

int LogDomainForRows(uint64_t rows) {
  int log = 1;
  while (log < 63 && (uint64_t{1} << log) < rows) ++log;
  return log;
}

absl::Status CheckDomainFitsRows(const DpfParameters& params, uint64_t rows) {
  const int needed = LogDomainForRows(rows);
  if (params.log_domain != needed) {
    return absl::InvalidArgumentError(
        absl::StrFormat("key's log domain %d does not fit a table of %d rows (needs %d)",
                        params.log_domain, rows, needed));
  }
  return absl::OkStatus();
}

std::string_view PrgName(Prg prg) {
  switch (prg) {
    case Prg::kAes128:
      return "aes128";
    case Prg::kChaCha8:
      return "chacha8";
    case Prg::kChaCha12:
      return "chacha12";
    case Prg::kChaCha20:
      return "chacha20";
    case Prg::kSipHash:
      return "siphash";
  }
  return "unknown";
}

absl::StatusOr<Prg> ParsePrg(std::string_view name) {
  for (Prg prg : {Prg::kAes128, Prg::kChaCha8, Prg::kChaCha12, Prg::kChaCha20, Prg::kSipHash}) {
    if (PrgName(prg) == name) return prg;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown PRG '", std::string(name), "' (expected aes128, chacha8, chacha12, chacha20 or siphash)"));
}

absl::StatusOr<DpfParameters> ParseOutput(std::string_view name, DpfParameters base) {
  if (name == "xor") {
    base.output = OutputType::kXor;
    base.leaf_words_log2 = 0;
    return base;
  }
  int words = 0;
  if (name.substr(0, 3) == "add" && absl::SimpleAtoi(std::string(name.substr(3)), &words)) {
    for (int log = 0; log <= kMaxLeafWordsLog2; ++log) {
      if (words == 1 << log) {
        base.output = OutputType::kAdditive;
        base.leaf_words_log2 = log;
        return base;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown output '", std::string(name), "' (expected xor, add1, add2, add4, add8 or add16)"));
}

std::string OutputName(const DpfParameters& params) {
  if (params.output == OutputType::kXor) return "xor";
  return absl::StrCat("add", 1 << params.leaf_words_log2);
}

}  // namespace veil::dpf
