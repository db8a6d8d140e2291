#include "bench/suite.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace veil::bench {

std::string Flags::Str(const std::string& name, const std::string& fallback) const {
  used_[name] = true;
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Flags::Int(const std::string& name, int64_t fallback) const {
  std::string s = Str(name, "");
  int64_t v = fallback;
  if (!s.empty() && !absl::SimpleAtoi(s, &v)) {
    std::cerr << "veil-bench: --" << name << " expects an integer, got '" << s << "'\n";
    std::exit(2);
  }
  return v;
}

double Flags::Double(const std::string& name, double fallback) const {
  std::string s = Str(name, "");
  double v = fallback;
  if (!s.empty() && !absl::SimpleAtod(s, &v)) {
    std::cerr << "veil-bench: --" << name << " expects a number, got '" << s << "'\n";
    std::exit(2);
  }
  return v;
}

std::vector<std::string> Flags::Unused() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : values_) {
    if (!used_.count(name) && name != "json-out") out.push_back(name);
  }
  return out;
}

namespace {
std::string& JsonOutPath() {
  static std::string path;
  return path;
}
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void SetJsonOut(const std::string& path) { JsonOutPath() = path; }

JsonLine& JsonLine::Add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, "\"" + Escape(value) + "\"");
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, double value) {
  fields_.emplace_back(key, std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null");
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, absl::StrFormat("%d", value));
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, bool value) {
  fields_.emplace_back(key, value ? "true" : "false");
  return *this;
}

JsonLine& JsonLine::AddRoofline(double batch, double qps, double prg_s, double mac_s,
                                double mem_s) {
  const double roofline_qps = batch / std::max({prg_s, mac_s, mem_s});
  return Add("prg_ms", prg_s * 1e3)
      .Add("mac_ms", mac_s * 1e3)
      .Add("mem_ms", mem_s * 1e3)
      .Add("roofline_qps", roofline_qps)
      .Add("roofline_ratio", qps / roofline_qps);
}

void JsonLine::Emit() const {
  std::string line = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i) line += ", ";
    line += "\"" + fields_[i].first + "\": " + fields_[i].second;
  }
  line += "}";
  std::cout << line << std::endl;
  if (!JsonOutPath().empty()) std::ofstream(JsonOutPath(), std::ios::app) << line << "\n";
}

namespace {
std::vector<double> SortedTimes(const std::function<void()>& run, int warmup, int max_reps,
                                double budget_s) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  double spent = 0;
  while (static_cast<int>(times.size()) < max_reps && (times.size() < 3 || spent < budget_s)) {
    auto start = std::chrono::steady_clock::now();
    run();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.push_back(s);
    spent += s;
  }
  std::sort(times.begin(), times.end());
  return times;
}
}  // namespace

double MedianSeconds(const std::function<void()>& run, int warmup, int max_reps, double budget_s) {
  std::vector<double> times = SortedTimes(run, warmup, max_reps, budget_s);
  return times[times.size() / 2];
}

double FastestSeconds(const std::function<void()>& run, int warmup, int max_reps, double budget_s) {
  return SortedTimes(run, warmup, max_reps, budget_s).front();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

// CPU seconds (user + system) used so far by process `pid`, from /proc.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

double SelfCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace veil::bench
