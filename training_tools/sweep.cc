#include "training_tools/sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "training_tools/simulate.h"

namespace veil::training {
namespace {

SweepGrid Grid(std::vector<double> hot_fractions, std::vector<int32_t> hot_bins,
               std::vector<int32_t> hot_rounds, std::vector<int32_t> cold_bins,
               std::vector<int32_t> cold_rounds, std::vector<int32_t> colocations) {
  SweepGrid grid;
  grid.hot_fractions = std::move(hot_fractions);
  grid.hot_bins = std::move(hot_bins);
  grid.hot_rounds = std::move(hot_rounds);
  grid.cold_bins = std::move(cold_bins);
  grid.cold_rounds = std::move(cold_rounds);
  grid.colocations = std::move(colocations);
  return grid;
}

int32_t HotRows(double hot_fraction, int32_t num_rows) {
  return static_cast<int32_t>(std::lround(std::clamp(hot_fraction, 0.0, 1.0) * num_rows));
}

// The grid's distinct layouts the policy allows: with no hot table the hot knobs do not matter,
// a table never queried needs no bin count, and a layout that queries nothing is left out.
std::vector<LayoutChoice> Choices(const SweepGrid& grid, int32_t num_rows, ReachablePolicy policy) {
  std::vector<LayoutChoice> choices;
  auto add = [&](const LayoutChoice& choice) {
    if (choice.hot_rounds == 0 && choice.cold_rounds == 0) return;
    if (policy == ReachablePolicy::kAll && LeavesATableUnqueried(choice, num_rows)) return;
    choices.push_back(choice);
  };
  for (double hot_fraction : grid.hot_fractions) {
    for (int32_t c : grid.colocations) {
      for (int32_t cold_bins : grid.cold_bins) {
        for (int32_t cold_rounds : grid.cold_rounds) {
          if (cold_rounds == 0 && cold_bins != grid.cold_bins.front()) continue;
          if (HotRows(hot_fraction, num_rows) == 0) {
            add({0, 0, 0, cold_bins, cold_rounds, c});
            continue;
          }
          for (int32_t hot_bins : grid.hot_bins) {
            for (int32_t hot_rounds : grid.hot_rounds) {
              add({hot_fraction, hot_bins, hot_rounds, cold_bins, cold_rounds, c});
            }
          }
        }
      }
    }
  }
  return choices;
}

// Runs body(i) for i in [0, n) on up to `threads` threads; returns the error of the lowest i
// that failed (the same whatever the thread count).
absl::Status ParallelFor(int threads, size_t n, const std::function<absl::Status(size_t)>& body,
                         const std::function<void(size_t done)>& progress) {
  std::atomic<size_t> next{0};
  std::mutex mutex;
  size_t done = 0, failed_index = n;
  absl::Status failure;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      absl::Status status = body(i);
      std::lock_guard<std::mutex> lock(mutex);
      if (!status.ok() && i < failed_index) {
        failed_index = i;
        failure = std::move(status);
      }
      if (progress) progress(++done);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(n)); ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  return failure;
}

// The metric without a model: per example the wanted rows fetched, out of the wanted rows.
class FetchedShareModel : public QualityModel {
 public:
  explicit FetchedShareModel(const std::vector<RowRequest>& wanted) : wanted_(wanted) {}
  Metric metric() const override { return Metric::kFetchedShare; }
  std::vector<double> Targets() const override {
    std::vector<double> sizes;
    for (const RowRequest& request : wanted_) sizes.push_back(static_cast<double>(request.size()));
    return sizes;
  }
  Outcomes Score(absl::Span<const ExampleQuery> queries) const override {
    Outcomes fetched;
    for (const ExampleQuery& query : queries) {
      const RowRequest& wanted = wanted_[query.example];
      size_t fetched_rows = 0;
      for (int32_t row : wanted) {
        fetched_rows += !std::binary_search(query.missing->begin(), query.missing->end(), row);
      }
      fetched.push_back(static_cast<double>(fetched_rows));
    }
    return fetched;
  }

 private:
  const std::vector<RowRequest>& wanted_;
};

// Every example's distinct missing-row sets, numbered per example.
class MissingSets {
 public:
  explicit MissingSets(size_t examples) : index_(examples) {}

  // The ids of sets[i] (for example i), new sets numbered as they come. Thread-safe.
  std::vector<int32_t> Intern(std::vector<std::vector<int32_t>> sets) {
    std::vector<int32_t> ids(sets.size());
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < sets.size(); ++i) {
      auto& index = index_[i];
      ids[i] =
          index.try_emplace(std::move(sets[i]), static_cast<int32_t>(index.size())).first->second;
    }
    return ids;
  }

  // Renumbers each example's sets in lexicographic order, so that what the models are asked
  // does not depend on the order layouts were planned in, and rewrites `ids` (lists returned by
  // Intern). Interning ends.
  void Canonicalize(std::vector<std::vector<int32_t>*> ids) {
    std::vector<std::vector<int32_t>> renumber(index_.size());
    sets_.resize(index_.size());
    for (size_t e = 0; e < index_.size(); ++e) {
      std::vector<std::pair<std::vector<int32_t>, int32_t>> sorted(index_[e].begin(),
                                                                   index_[e].end());
      std::sort(sorted.begin(), sorted.end());
      renumber[e].resize(sorted.size());
      for (size_t k = 0; k < sorted.size(); ++k) {
        renumber[e][sorted[k].second] = static_cast<int32_t>(k);
        sets_[e].push_back(std::move(sorted[k].first));
      }
      index_[e] = {};
    }
    for (std::vector<int32_t>* list : ids) {
      for (size_t e = 0; e < list->size(); ++e) (*list)[e] = renumber[e][(*list)[e]];
    }
  }
  const std::vector<std::vector<std::vector<int32_t>>>& sets() const { return sets_; }

 private:
  std::mutex mutex_;
  std::vector<absl::flat_hash_map<std::vector<int32_t>, int32_t>> index_;
  std::vector<std::vector<std::vector<int32_t>>> sets_;
};

// Every model's outcome of every (example, missing set): by_model[m][first_query[e] + id].
struct CachedOutcomes {
  std::vector<size_t> first_query;
  std::vector<Outcomes> by_model;

  // Per model, the outcomes of the sets `ids` (one per example).
  std::vector<Outcomes> Arm(const std::vector<int32_t>& ids) const {
    std::vector<Outcomes> outcomes(by_model.size(), Outcomes(ids.size()));
    for (size_t m = 0; m < by_model.size(); ++m) {
      for (size_t e = 0; e < ids.size(); ++e) outcomes[m][e] = by_model[m][first_query[e] + ids[e]];
    }
    return outcomes;
  }
};

// Scores the sets in fixed chunks of queries, so that every model sees the same batches whatever
// the thread count.
absl::Status ScoreEverySet(const MissingSets& sets, const std::vector<QualityModel*>& models,
                           const SweepOptions& options, CachedOutcomes& cached) {
  const auto& all = sets.sets();
  std::vector<ExampleQuery> queries;
  cached.first_query.assign(all.size(), 0);
  for (size_t e = 0; e < all.size(); ++e) {
    cached.first_query[e] = queries.size();
    for (const auto& missing : all[e]) queries.push_back({static_cast<int32_t>(e), &missing});
  }
  constexpr size_t kChunk = 1024;
  const size_t chunks = (queries.size() + kChunk - 1) / kChunk;
  cached.by_model.assign(models.size(), Outcomes(queries.size()));
  const size_t tasks = chunks * models.size();
  if (options.progress) options.progress("examples scored (chunks)", 0, tasks);
  return ParallelFor(
      options.threads, tasks,
      [&](size_t task) {
        const size_t m = task / chunks, start = task % chunks * kChunk;
        const size_t count = std::min(kChunk, queries.size() - start);
        const Outcomes outcomes =
            models[m]->Score(absl::MakeConstSpan(queries).subspan(start, count));
        std::copy(outcomes.begin(), outcomes.end(), cached.by_model[m].begin() + start);
        return absl::OkStatus();
      },
      [&](size_t done) {
        if (options.progress) options.progress("examples scored (chunks)", done, tasks);
      });
}

std::vector<int32_t> SortedUnion(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// The validation requests as the sweep sees them.
struct Examples {
  std::vector<RowRequest> planned;  // what the client fetches (unseen rows out: kDefault)
  std::vector<RowRequest> unseen;   // wanted rows never seen in training (kDefault only)
  std::vector<int32_t> cluster;     // dense client index
  int32_t clusters = 0;
};

Examples PrepareExamples(const AccessProfile& profile, const ValidationSet& validation,
                         UnseenRowsPolicy policy, SweepResult& result) {
  Examples examples;
  absl::flat_hash_map<int32_t, int32_t> dense;
  for (int32_t client : validation.clients) {
    examples.cluster.push_back(dense.try_emplace(client, dense.size()).first->second);
  }
  examples.clusters = static_cast<int32_t>(dense.size());
  for (int64_t f : profile.frequency) result.unseen_rows += f == 0;
  std::vector<bool> client_wants_unseen(examples.clusters, false);
  int64_t wanted = 0, unseen = 0;
  for (size_t i = 0; i < validation.requests.size(); ++i) {
    RowRequest planned, never_seen;
    for (int32_t row : validation.requests[i]) {
      const bool seen = row >= 0 && row < profile.num_rows && profile.frequency[row] > 0;
      (seen || policy == UnseenRowsPolicy::kFetch ? planned : never_seen).push_back(row);
      unseen += !seen;
      if (!seen) client_wants_unseen[examples.cluster[i]] = true;
    }
    wanted += static_cast<int64_t>(validation.requests[i].size());
    examples.planned.push_back(std::move(planned));
    examples.unseen.push_back(std::move(never_seen));
  }
  result.unseen_wanted_share = wanted ? static_cast<double>(unseen) / wanted : 0;
  result.unseen_client_share =
      examples.clusters ? static_cast<double>(std::count(client_wants_unseen.begin(),
                                                         client_wants_unseen.end(), true)) /
                              examples.clusters
                        : 0;
  return examples;
}

// Share of clients with a planned row that no queried table holds (as a primary row or a
// co-located copy).
double UnreachableClientShare(const embedding::Layout& layout, const Examples& examples) {
  std::vector<bool> reachable(layout.num_rows(), false);
  for (int table = 0; table < embedding::kNumLayoutTables; ++table) {
    const auto& shape = layout.shape(table);
    if (shape.rounds == 0) continue;
    for (int32_t bin = 0; bin < shape.bins; ++bin) {
      for (int32_t slot = 0; slot < layout.slots_per_bin(table); ++slot) {
        for (int32_t row : layout.Entry({table, bin, slot})) {
          if (row >= 0) reachable[row] = true;
        }
      }
    }
  }
  std::vector<bool> affected(examples.clusters, false);
  for (size_t i = 0; i < examples.planned.size(); ++i) {
    for (int32_t row : examples.planned[i]) {
      if (!reachable[row]) affected[examples.cluster[i]] = true;
    }
  }
  return examples.clusters
             ? static_cast<double>(std::count(affected.begin(), affected.end(), true)) /
                   examples.clusters
             : 0;
}

bool Better(double a, double b, bool higher_is_better) { return higher_is_better ? a > b : a < b; }

// Index of the cheapest point (computation, then bytes) among those `eligible`, or -1.
int Cheapest(const std::vector<SweepPoint>& points,
             const std::function<bool(const SweepPoint&)>& eligible) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(points.size()); ++i) {
    if (!eligible(points[i])) continue;
    if (best < 0 || points[i].cost.words_scanned < points[best].cost.words_scanned ||
        (points[i].cost.words_scanned == points[best].cost.words_scanned &&
         points[i].bytes() < points[best].bytes())) {
      best = i;
    }
  }
  return best;
}

// The choices, the Pareto front and whether the data supports a claim.
void Decide(const SweepOptions& options, SweepResult& result) {
  auto& points = result.points;
  const int64_t budget = options.max_bytes_per_inference;
  const bool opt_in = result.reachable == ReachablePolicy::kOptIn;
  auto allowed = [&](const SweepPoint& p) { return opt_in || p.reachable; };
  for (auto& p : points) {
    p.preserved = p.loss.high <= result.tolerance;
    p.pareto = allowed(p);
    for (const auto& q : points) {
      if (!p.pareto) break;
      if (!allowed(q)) continue;
      const bool higher = HigherIsBetter(result.metric);
      const bool no_worse = !Better(p.quality.value, q.quality.value, higher) &&
                            q.cost.words_scanned <= p.cost.words_scanned && q.bytes() <= p.bytes();
      const bool better = Better(q.quality.value, p.quality.value, higher) ||
                          q.cost.words_scanned < p.cost.words_scanned || q.bytes() < p.bytes();
      if (no_worse && better) p.pareto = false;
    }
  }
  auto in_budget = [&](const SweepPoint& p) { return p.bytes() <= budget; };
  result.chosen = Cheapest(
      points, [&](const SweepPoint& p) { return allowed(p) && p.preserved && in_budget(p); });
  result.baseline = Cheapest(
      points, [&](const SweepPoint& p) { return p.baseline && p.preserved && in_budget(p); });
  result.chosen_all_reachable = Cheapest(
      points, [&](const SweepPoint& p) { return p.reachable && p.preserved && in_budget(p); });
  for (int s = 0; s < result.seeds; ++s) {
    result.chosen_per_seed.push_back(Cheapest(points, [&](const SweepPoint& p) {
      return allowed(p) && p.preserved_per_seed[s] && in_budget(p);
    }));
    result.baseline_per_seed.push_back(Cheapest(points, [&](const SweepPoint& p) {
      return p.baseline && p.preserved_per_seed[s] && in_budget(p);
    }));
  }
  const Estimate& worth = result.worth;
  const double in_se = worth.se() > 0 ? worth.value / worth.se() : INFINITY;
  result.claim_supported = in_se >= options.min_worth_in_se && worth.low > result.tolerance;
  result.claim_note = absl::StrFormat(
      "the embeddings are worth %.4g %s (all rows against none; 95%% interval %.4g to %.4g, %.1f "
      "standard errors) against a tolerance of %.4g: %s",
      worth.value, MetricName(result.metric), worth.low, worth.high, in_se, result.tolerance,
      result.claim_supported
          ? "the data can tell preserved quality from lost"
          : absl::StrFormat("the data cannot support a claim (it needs at least %.0f standard "
                            "errors and an interval above the tolerance)",
                            options.min_worth_in_se));
}

}  // namespace

const char* ReachablePolicyName(ReachablePolicy policy) {
  return policy == ReachablePolicy::kAll ? "all" : "opt-in";
}

const char* UnseenRowsPolicyName(UnseenRowsPolicy policy) {
  return policy == UnseenRowsPolicy::kDefault ? "default" : "fetch";
}

absl::StatusOr<UnseenRowsPolicy> ParseUnseenRowsPolicy(absl::string_view name) {
  if (name == "default") return UnseenRowsPolicy::kDefault;
  if (name == "fetch") return UnseenRowsPolicy::kFetch;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown policy for unseen rows \"", name, "\" (default or fetch)"));
}

SweepGrid SweepGrid::Default(bool quick) {
  if (quick) {
    // 256 hot bins: one row per bin for small hot tables (clamped to the hot rows).
    return Grid({0, 0.05, 0.1, 0.2}, {16, 64, 256}, {1, 2, 4}, {16, 64, 256}, {0, 1, 2}, {0, 1, 2});
  }
  return Grid({0, 0.02, 0.05, 0.1, 0.2, 0.3}, {8, 16, 32, 64, 128}, {1, 2, 3, 4, 6},
              {8, 16, 32, 64, 128, 256, 512}, {0, 1, 2, 3}, {0, 1, 2, 4});
}

bool LeavesATableUnqueried(const LayoutChoice& choice, int32_t num_rows) {
  const int32_t hot = HotRows(choice.hot_fraction, num_rows);
  return (hot > 0 && choice.hot_rounds == 0) || (num_rows - hot > 0 && choice.cold_rounds == 0);
}

std::optional<double> SweepResult::Reduction() const {
  if (!claim_supported || chosen < 0 || baseline < 0) return std::nullopt;
  return static_cast<double>(points[baseline].cost.words_scanned) /
         static_cast<double>(points[chosen].cost.words_scanned);
}

std::optional<double> SweepResult::ReductionAllReachable() const {
  if (!claim_supported || chosen_all_reachable < 0 || baseline < 0) return std::nullopt;
  return static_cast<double>(points[baseline].cost.words_scanned) /
         static_cast<double>(points[chosen_all_reachable].cost.words_scanned);
}

std::vector<std::optional<double>> SweepResult::ReductionPerSeed() const {
  std::vector<std::optional<double>> reductions;
  for (size_t s = 0; s < chosen_per_seed.size(); ++s) {
    const int c = chosen_per_seed[s], b = baseline_per_seed[s];
    if (!claim_supported || c < 0 || b < 0) {
      reductions.push_back(std::nullopt);
    } else {
      reductions.push_back(static_cast<double>(points[b].cost.words_scanned) /
                           static_cast<double>(points[c].cost.words_scanned));
    }
  }
  return reductions;
}

double SweepResult::FetchedShareBar() const {
  double kept = INFINITY;
  for (const SweepPoint& p : points) {
    if (p.baseline && p.preserved) kept = std::min(kept, p.fetched_share);
  }
  if (std::isinf(kept)) return 0;
  double lost = -INFINITY;
  for (const SweepPoint& p : points) {
    if (p.baseline && !p.preserved && p.fetched_share < kept)
      lost = std::max(lost, p.fetched_share);
  }
  return std::isinf(lost) ? kept : (kept + lost) / 2;
}

bool SweepResult::OneScanIsTheFloor() const {
  return baseline >= 0 && points[baseline].choice.cold_rounds == 1;
}

LayoutChoice ChoiceOf(const embedding::Layout& layout) {
  const auto& hot = layout.shape(embedding::kHotTable);
  const auto& cold = layout.shape(embedding::kColdTable);
  return {static_cast<double>(layout.hot_rows().size()) / layout.num_rows(),
          hot.bins,
          hot.rounds,
          cold.bins,
          cold.rounds,
          layout.params().colocation};
}

absl::StatusOr<SweepResult> Sweep(const AccessProfile& profile, int32_t row_words,
                                  const ValidationSet& validation, const SweepGrid& grid,
                                  const SweepOptions& options,
                                  absl::Span<QualityModel* const> models) {
  const std::vector<LayoutChoice> choices = Choices(grid, profile.num_rows, options.reachable);
  return EvaluateLayouts(
      profile, row_words, choices,
      [&](size_t i) { return DesignLayout(profile, row_words, choices[i], options.seed); },
      validation, options, models);
}

absl::StatusOr<SweepResult> EvaluateLayouts(
    const AccessProfile& profile, int32_t row_words, const std::vector<LayoutChoice>& choices,
    const std::function<absl::StatusOr<embedding::Layout>(size_t)>& layout_of,
    const ValidationSet& validation, const SweepOptions& options,
    absl::Span<QualityModel* const> given_models) {
  if (validation.clients.size() != validation.requests.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sweep: ", validation.clients.size(),
                                                   " clients for ", validation.requests.size(),
                                                   " validation requests"));
  }
  SweepResult result;
  result.reachable = options.reachable;
  result.unseen = options.unseen;
  result.one_scan_words = int64_t{profile.num_rows} * row_words;
  const Examples examples = PrepareExamples(profile, validation, options.unseen, result);
  const size_t n = examples.planned.size();

  FetchedShareModel fetched_share(examples.planned);
  std::vector<QualityModel*> models(given_models.begin(), given_models.end());
  if (models.empty()) models.push_back(&fetched_share);
  ExampleSet example_set;
  example_set.metric = models[0]->metric();
  example_set.target = models[0]->Targets();
  example_set.cluster = examples.cluster;
  example_set.clusters = examples.clusters;
  for (QualityModel* model : models) {
    if (model->metric() != example_set.metric || model->Targets().size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sweep: the models must have one metric and score the ", n, " validation requests"));
    }
  }
  result.metric = example_set.metric;
  result.seeds = static_cast<int>(models.size());
  result.tolerance = options.tolerance > 0                    ? options.tolerance
                     : result.metric == Metric::kFetchedShare ? 1 - options.min_fetched_share
                                                              : DefaultTolerance(result.metric);
  auto report = [&](const char* stage, size_t total) -> std::function<void(size_t)> {
    if (!options.progress) return nullptr;
    options.progress(stage, 0, total);
    return [&options, stage, total](size_t done) { options.progress(stage, done, total); };
  };

  // 1. Plan every layout; intern each example's missing rows (the unseen ones included).
  MissingSets sets(n);
  std::vector<std::vector<int32_t>> all_rows(n);
  for (size_t i = 0; i < n; ++i) {
    all_rows[i] = SortedUnion(examples.planned[i], examples.unseen[i]);
  }
  std::vector<int32_t> reference_ids = sets.Intern(examples.unseen);
  std::vector<int32_t> no_rows_ids = sets.Intern(all_rows);
  result.points.resize(choices.size());
  std::vector<std::vector<int32_t>> layout_ids(choices.size());
  absl::Status planned = ParallelFor(
      options.threads, choices.size(),
      [&](size_t i) -> absl::Status {
        auto layout = layout_of(i);
        if (!layout.ok()) return layout.status();
        auto simulation = Simulate(*layout, examples.planned, options.backend_words_per_s);
        if (!simulation.ok()) return simulation.status();
        SweepPoint& point = result.points[i];
        point.choice = choices[i];
        // The bins the layout really has (DesignLayout clamps them to the table's rows).
        point.choice.hot_bins = layout->shape(embedding::kHotTable).bins;
        point.choice.cold_bins = layout->shape(embedding::kColdTable).bins;
        point.cost = simulation->cost;
        point.latency_ms = simulation->latency_ms;
        point.fetched_share = simulation->fetched_share;
        point.complete_share = simulation->complete_share;
        point.reachable = !LeavesATableUnqueried(choices[i], profile.num_rows);
        point.unreachable_client_share =
            point.reachable ? 0.0 : UnreachableClientShare(*layout, examples);
        point.baseline =
            HotRows(choices[i].hot_fraction, profile.num_rows) == 0 && choices[i].colocation == 0;
        for (size_t e = 0; e < n; ++e) {
          simulation->missing[e] = SortedUnion(simulation->missing[e], examples.unseen[e]);
        }
        layout_ids[i] = sets.Intern(std::move(simulation->missing));
        return absl::OkStatus();
      },
      report("layouts planned", choices.size()));
  if (!planned.ok()) return planned;
  std::vector<std::vector<int32_t>*> id_lists = {&reference_ids, &no_rows_ids};
  for (auto& ids : layout_ids) id_lists.push_back(&ids);
  sets.Canonicalize(id_lists);

  // 2. Each model scores every (example, missing set) once.
  CachedOutcomes cached;
  if (auto scored = ScoreEverySet(sets, models, options, cached); !scored.ok()) return scored;
  auto arm = [&](const std::vector<int32_t>& ids) { return cached.Arm(ids); };

  // 3. Each layout's quality and paired loss, with their intervals.
  const PairedEvaluation evaluation(example_set, arm(reference_ids), options.bootstrap_replicates,
                                    options.bootstrap_seed);
  result.reference = evaluation.reference();
  const auto none = evaluation.Evaluate(arm(no_rows_ids));
  result.no_rows = none.quality;
  result.worth = none.loss;
  result.reference_per_seed = evaluation.reference_per_seed();
  result.worth_per_seed = none.loss_per_seed;
  absl::Status evaluated = ParallelFor(
      options.threads, choices.size(),
      [&](size_t i) {
        const auto evaluated = evaluation.Evaluate(arm(layout_ids[i]));
        SweepPoint& point = result.points[i];
        point.quality = evaluated.quality;
        point.loss = evaluated.loss;
        for (double high : evaluated.loss_high_per_seed) {
          point.preserved_per_seed.push_back(high <= result.tolerance);
        }
        return absl::OkStatus();
      },
      report("layouts evaluated", choices.size()));
  if (!evaluated.ok()) return evaluated;
  Decide(options, result);
  return result;
}

}  // namespace veil::training
