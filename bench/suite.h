// veil-bench suites: each suite registers itself with a name and help text; the main program
// parses --flag=value pairs and runs one suite. Results are JSON lines on stdout
// (BENCHMARKS.md), progress goes to stderr.
#ifndef VEIL_BENCH_SUITE_H_
#define VEIL_BENCH_SUITE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace veil::bench {

class Flags {
 public:
  explicit Flags(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::string Str(const std::string& name, const std::string& fallback) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Double(const std::string& name, double fallback) const;
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  // Flags given on the command line that no accessor asked for (reported as errors).
  std::vector<std::string> Unused() const;

 private:
  std::map<std::string, std::string> values_;
  mutable std::map<std::string, bool> used_;
};

// One JSON object on one line: fields in insertion order.
class JsonLine {
 public:
  explicit JsonLine(const std::string& suite) { Add("suite", suite); }
  JsonLine& Add(const std::string& key, const std::string& value);
  JsonLine& Add(const std::string& key, const char* value) { return Add(key, std::string(value)); }
  JsonLine& Add(const std::string& key, double value);
  JsonLine& Add(const std::string& key, int64_t value);
  JsonLine& Add(const std::string& key, int value) { return Add(key, int64_t{value}); }
  JsonLine& Add(const std::string& key, uint64_t value) { return Add(key, int64_t(value)); }
  JsonLine& Add(const std::string& key, bool value);
  // The roofline fields of a pir-answer line: the seconds a batch of `batch` keys needs at the
  // measured ceilings for PRG work, multiply-accumulates and table reads, the bound they give
  // (the largest of the three) and how close `qps` comes to it.
  JsonLine& AddRoofline(double batch, double qps, double prg_s, double mac_s, double mem_s);
  // Prints to stdout (and appends to --json-out, if given).
  void Emit() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // value already JSON-encoded
};

using SuiteFn = std::function<absl::Status(const Flags&)>;

// Runs another registered suite with the same flags (e.g. pir-answer --backend=gpu runs
// pir-answer-gpu). Returns NOT_FOUND if that suite is not in this build.
absl::Status RunSuite(const std::string& name, const Flags& flags);

struct SuiteRegistration {
  SuiteRegistration(const char* name, const char* help, SuiteFn fn);
};

// Median of repeated timings (seconds) of `run`, after `warmup` untimed calls. Stops after
// `max_reps` or when `budget_s` is spent (at least 3 reps).
double MedianSeconds(const std::function<void()>& run, int warmup = 1, int max_reps = 15,
                     double budget_s = 3.0);

// Fastest of repeated timings: for ceilings (a machine's limit is its best run; interference
// only slows a run down).
double FastestSeconds(const std::function<void()>& run, int warmup = 1, int max_reps = 15,
                      double budget_s = 3.0);

// The value at quantile p (0..1) of v; 0 for none.
double Percentile(std::vector<double> v, double p);

// CPU seconds (user + system) used so far by process `pid` (from /proc), and by this process.
double ProcessCpuSeconds(pid_t pid);
double SelfCpuSeconds();

}  // namespace veil::bench

#endif  // VEIL_BENCH_SUITE_H_
