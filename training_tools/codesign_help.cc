#include "training_tools/codesign_help.h"

#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace veil::training {
namespace {

struct FlagGroup {
  const char* name;
  std::vector<const char*> flags;
};

const FlagGroup kInput = {
    "input (one of --workload, --interactions, --text)",
    {"workload", "data_dir", "interactions", "user_column", "item_column", "time_column",
     "label_column", "positive_threshold", "text", "text_split", "text_document_words", "dim",
     "history", "vocab", "window"}};
const FlagGroup kModel = {"models",
                          {"model", "seeds", "seed", "epochs", "validation_examples", "threads"}};
const FlagGroup kStatistics = {"quality and its uncertainty",
                               {"bootstrap", "tolerance", "unseen_rows"}};
const FlagGroup kLayout = {"layout",
                           {"hot_fraction", "hot_bins", "hot_rounds", "cold_bins", "cold_rounds",
                            "colocation", "top_k", "layout", "backend_words_per_s"}};
const FlagGroup kSweep = {
    "sweep",
    {"quick", "allow_unreachable_rows", "max_bytes", "backend_words_per_s", "grid_hot_fractions",
     "grid_hot_bins", "grid_hot_rounds", "grid_cold_bins", "grid_cold_rounds", "grid_colocations",
     "payoff", "payoff_max_rows", "top_k"}};
const FlagGroup kPrivate = {
    "private profile",
    {"private", "paillier_bits", "insecure_for_comparison", "report_value_bits", "threads"}};
const FlagGroup kSynth = {"synthetic table", {"synthetic_rows", "synthetic_requests", "seed"}};
const FlagGroup kOutput = {"output", {"out"}};

struct Command {
  const char* name;
  const char* description;
  const char* example;
  std::vector<const FlagGroup*> groups;
};

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"profile",
       "Counts how often each table row is looked up in the training split, and which rows are "
       "looked up together; prints a skew summary and writes the profile CSV with --out. With "
       "--private the counts come from the clients' Paillier-encrypted reports.",
       "veil-codesign profile --interactions=ratings.csv --label_column=rating --out=profile.csv",
       {&kInput, &kLayout, &kPrivate, &kOutput}},
      {"layout",
       "Builds one batch-PIR layout (hot table, bins, rounds, co-location) from the training "
       "profile and the layout flags, and writes the layout file.",
       "veil-codesign layout --workload=movielens --hot_fraction=0.05 --cold_bins=64 "
       "--out=movielens.veillayout",
       {&kInput, &kLayout, &kPrivate, &kOutput}},
      {"simulate",
       "Plans every validation request under one layout (--layout, or built from the layout "
       "flags) with the client's planner: cost, fetched share, and with --model the models' "
       "quality and its paired loss, with 95% intervals over examples and seeds.",
       "veil-codesign simulate --workload=brown --layout=brown.veillayout --seeds=3",
       {&kInput, &kModel, &kStatistics, &kLayout, &kPrivate}},
      {"sweep",
       "Evaluates a grid of layouts and chooses the cheapest whose quality is preserved: the "
       "upper end of the 95% interval of its paired quality loss (against fetching every wanted "
       "row; examples resampled by client, models over --seeds) is within the tolerance. Every "
       "row stays reachable unless --allow_unreachable_rows. Writes OUT/sweep-<workload>.csv and "
       ".png and prints one JSON line (compute_reduction_at_preserved_quality, "
       "bytes_per_inference, reachable_policy, quality_ci_low/high, seeds, wall_s).",
       "veil-codesign sweep --workload=movielens --quick --seeds=3 --out=results",
       {&kInput, &kModel, &kStatistics, &kSweep, &kPrivate, &kOutput}},
      {"train",
       "Trains one model (--seed) and exports its embedding table as OUT/<workload>.f32 with a "
       "JSON sidecar (input of `veil table build`); prints its quality with every row and with "
       "none.",
       "veil-codesign train --text=novels.txt --text_split=chapters --out=models",
       {&kInput, &kModel, &kOutput}},
      {"synth",
       "Fits the log's popularity (Zipf) and co-access, generates the requests of a larger "
       "table and sweeps layouts on them (quality: the fetched share; no model).",
       "veil-codesign synth --workload=movielens --quick --synthetic_rows=1000000 --out=results",
       {&kInput, &kSynth, &kStatistics, &kSweep, &kOutput}},
  };
  return *commands;
}

std::string Wrapped(absl::string_view text, const std::string& indent) {
  std::string out, current = indent;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (current.size() + word.size() > 98) {
      absl::StrAppend(&out, current, "\n");
      current = indent;
    }
    absl::StrAppend(&current, current.size() > indent.size() ? " " : "", word);
  }
  return absl::StrCat(out, current, "\n");
}

// "  --name=default" and the help text wrapped under it.
std::string FlagHelp(const char* name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (!flag) return "";
  const std::string value = flag->DefaultValue();
  return absl::StrCat("  --", name, "=", value.empty() ? "\"\"" : value, "\n",
                      Wrapped(flag->Help(), "      "));
}

}  // namespace

std::string CodesignUsage() {
  return "usage: veil-codesign COMMAND [--workload=movielens|brown | --interactions=FILE | "
         "--text=FILE|DIR] [flags]\n       veil-codesign help COMMAND (or COMMAND --help): the "
         "command's flags with their defaults";
}

std::string CodesignHelp(const std::string& command) {
  if (command.empty()) {
    std::string help = absl::StrCat(
        "veil-codesign: co-design of batch-PIR layouts (hot table, bins, co-location) from "
        "training logs, judged by the model's quality with its uncertainty.\n\n",
        CodesignUsage(), "\n\ncommands:\n");
    for (const Command& c : Commands()) {
      absl::StrAppend(&help, "  ", c.name, "\n", Wrapped(c.description, "      "), "      e.g. ",
                      c.example, "\n");
    }
    absl::StrAppend(&help, "\nflags of every command, ", kInput.name, ":\n");
    for (const char* name : kInput.flags) absl::StrAppend(&help, FlagHelp(name));
    return help;
  }
  for (const Command& c : Commands()) {
    if (command != c.name) continue;
    std::string help = absl::StrCat("veil-codesign ", c.name, "\n", Wrapped(c.description, "  "),
                                    "\nexample:\n  ", c.example, "\n");
    for (const FlagGroup* group : c.groups) {
      absl::StrAppend(&help, "\n", group->name, ":\n");
      for (const char* name : group->flags) absl::StrAppend(&help, FlagHelp(name));
    }
    return help;
  }
  return "";
}

}  // namespace veil::training
