// veil.codesign over training_tools/ (profile.h, simulate.h, sweep.h, workload.h): workloads from
// real logs, access profiles, layouts, the collision and cost simulation, and sweeps, with the
// quality measured by Python models (one per training seed, QualityModel's members) when given,
// and reported with its 95% intervals (quality.h).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "embedding/layout.h"
#include "python/src/bindings.h"
#include "training_tools/profile.h"
#include "training_tools/quality.h"
#include "training_tools/simulate.h"
#include "training_tools/sweep.h"
#include "training_tools/sweep_report.h"
#include "training_tools/workload.h"

namespace veil::python {
namespace {

namespace py = pybind11;
using embedding::Layout;
using training::AccessProfile;
using training::RowRequest;

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Requests in CSR form (the rows of request i are flat[offsets[i] .. offsets[i + 1]]), as
// python/veil/codesign.py passes them. Throws INVALID_ARGUMENT for offsets that do not fit.
std::vector<RowRequest> Requests(const Array<int32_t>& flat, const Array<int64_t>& offsets) {
  const int64_t n = offsets.size();
  const int64_t* o = offsets.data();
  if (n == 0 || o[0] != 0 || o[n - 1] != flat.size()) {
    throw StatusError(absl::InvalidArgumentError("requests: offsets do not delimit the rows"));
  }
  std::vector<RowRequest> requests(static_cast<size_t>(n - 1));
  for (int64_t i = 0; i + 1 < n; ++i) {
    if (o[i + 1] < o[i]) {
      throw StatusError(absl::InvalidArgumentError("requests: offsets must not decrease"));
    }
    requests[i].assign(flat.data() + o[i], flat.data() + o[i + 1]);
  }
  return requests;
}

py::list RequestList(const std::vector<RowRequest>& requests) {
  py::list out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) out[i] = py::cast(requests[i]);
  return out;
}

AccessProfile Profile(const Array<int64_t>& frequency,
                      const std::vector<std::vector<int32_t>>& co_accessed, int64_t num_requests) {
  AccessProfile profile;
  profile.num_rows = static_cast<int32_t>(frequency.size());
  profile.num_requests = num_requests;
  profile.frequency.assign(frequency.data(), frequency.data() + frequency.size());
  profile.co_accessed = co_accessed;
  if (!profile.co_accessed.empty() &&
      profile.co_accessed.size() != static_cast<size_t>(profile.num_rows)) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("profile: ", profile.co_accessed.size(), " co-accessed lists for ",
                     profile.num_rows, " rows")));
  }
  profile.co_accessed.resize(profile.num_rows);
  return profile;
}

// QualityModel implemented by a Python object (veil.codesign.QualityModel): `metric` and
// `targets()` are read once; `score(examples, missing)` is called with the GIL held from the
// sweep's threads. A Python exception cannot cross those threads: the first one is kept, later
// chunks are not scored, and RethrowError raises it once the sweep is back on Python's thread.
class PyQualityModel : public training::QualityModel {
 public:
  explicit PyQualityModel(py::object model) : model_(std::move(model)) {
    const std::string metric = py::str(model_.attr("metric"));
    if (metric == training::MetricName(training::Metric::kAuc)) {
      metric_ = training::Metric::kAuc;
    } else if (metric == training::MetricName(training::Metric::kPerplexity)) {
      metric_ = training::Metric::kPerplexity;
    } else {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "QualityModel.metric must be \"auc\" or \"perplexity\", not \"", metric, "\"")));
    }
    targets_ = model_.attr("targets")().cast<std::vector<double>>();
  }
  ~PyQualityModel() override {
    py::gil_scoped_acquire gil;
    error_.reset();
  }
  training::Metric metric() const override { return metric_; }
  std::vector<double> Targets() const override { return targets_; }
  training::Outcomes Score(absl::Span<const training::ExampleQuery> queries) const override {
    py::gil_scoped_acquire gil;
    if (failed_) return training::Outcomes(queries.size(), 0);
    try {
      std::vector<int32_t> examples;
      py::list missing(queries.size());
      for (size_t i = 0; i < queries.size(); ++i) {
        examples.push_back(queries[i].example);
        missing[i] = py::cast(*queries[i].missing);
      }
      auto outcomes = model_.attr("score")(examples, missing).cast<training::Outcomes>();
      if (outcomes.size() != queries.size()) {
        throw StatusError(
            absl::InvalidArgumentError(absl::StrCat("QualityModel.score returned ", outcomes.size(),
                                                    " outcomes for ", queries.size(), " queries")));
      }
      return outcomes;
    } catch (py::error_already_set& e) {
      error_.emplace(std::move(e));
    } catch (const StatusError& e) {
      status_error_.emplace(e);
    } catch (const py::cast_error& e) {
      status_error_.emplace(absl::InvalidArgumentError(
          absl::StrCat("QualityModel.score must return one float per query: ", e.what())));
    }
    failed_ = true;
    return training::Outcomes(queries.size(), 0);
  }
  // Raises the first failure of score(), if any (with the GIL held).
  void RethrowError() {
    if (status_error_) throw *status_error_;
    if (error_) throw *error_;
  }

 private:
  py::object model_;
  training::Metric metric_;
  std::vector<double> targets_;
  mutable bool failed_ = false;  // guarded by the GIL, like the two below
  mutable std::optional<py::error_already_set> error_;
  mutable std::optional<StatusError> status_error_;
};

py::dict EstimateDict(const training::Estimate& e) {
  py::dict d;
  d["value"] = e.value;
  d["low"] = e.low;
  d["high"] = e.high;
  d["se"] = e.se();
  d["se_examples"] = e.se_examples;
  d["se_seeds"] = e.se_seeds;
  d["df"] = e.df;
  return d;
}

py::object Optional(const std::optional<double>& value) {
  return value ? py::cast(*value) : py::none();
}

py::dict SimulationDict(const training::SimulationResult& s) {
  py::dict d = CostDict(s.cost);
  d["latency_ms"] = s.latency_ms;
  d["fetched_share"] = s.fetched_share;
  d["complete_share"] = s.complete_share;
  return d;
}

training::SweepGrid Grid(const py::dict& grid) {
  training::SweepGrid g;
  g.hot_fractions = grid["hot_fractions"].cast<std::vector<double>>();
  g.hot_bins = grid["hot_bins"].cast<std::vector<int32_t>>();
  g.hot_rounds = grid["hot_rounds"].cast<std::vector<int32_t>>();
  g.cold_bins = grid["cold_bins"].cast<std::vector<int32_t>>();
  g.cold_rounds = grid["cold_rounds"].cast<std::vector<int32_t>>();
  g.colocations = grid["colocations"].cast<std::vector<int32_t>>();
  return g;
}

py::dict GridDict(const training::SweepGrid& g) {
  py::dict d;
  d["hot_fractions"] = g.hot_fractions;
  d["hot_bins"] = g.hot_bins;
  d["hot_rounds"] = g.hot_rounds;
  d["cold_bins"] = g.cold_bins;
  d["cold_rounds"] = g.cold_rounds;
  d["colocations"] = g.colocations;
  return d;
}

// The sweep's points (the columns of WriteSweepCsv, the quality and paired loss with their 95%
// intervals) and its summary: policies, reference, no rows, worth, the claim and the choices.
py::dict SweepDict(const training::SweepResult& r, const std::string& workload) {
  std::vector<py::dict> points;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const training::SweepPoint& p = r.points[i];
    py::dict d;
    d["hot_fraction"] = p.choice.hot_fraction;
    d["hot_bins"] = p.choice.hot_bins;
    d["hot_rounds"] = p.choice.hot_rounds;
    d["cold_bins"] = p.choice.cold_bins;
    d["cold_rounds"] = p.choice.cold_rounds;
    d["colocation"] = p.choice.colocation;
    for (auto item : CostDict(p.cost)) d[item.first] = item.second;
    d["latency_ms"] = p.latency_ms;
    d["fetched_share"] = p.fetched_share;
    d["complete_share"] = p.complete_share;
    d["reachable"] = p.reachable;
    d["unreachable_client_share"] = p.unreachable_client_share;
    d["quality"] = p.quality.value;
    d["quality_ci_low"] = p.quality.low;
    d["quality_ci_high"] = p.quality.high;
    d["loss"] = p.loss.value;
    d["loss_ci_low"] = p.loss.low;
    d["loss_ci_high"] = p.loss.high;
    d["preserved_per_seed"] = std::vector<bool>(p.preserved_per_seed);
    d["baseline"] = p.baseline;
    d["preserved"] = p.preserved;
    d["pareto"] = p.pareto;
    d["chosen"] = static_cast<int>(i) == r.chosen;
    d["chosen_baseline"] = static_cast<int>(i) == r.baseline;
    points.push_back(std::move(d));
  }
  py::dict d;
  d["metric"] = training::MetricName(r.metric);
  d["higher_is_better"] = training::HigherIsBetter(r.metric);
  d["seeds"] = r.seeds;
  d["tolerance"] = r.tolerance;
  d["reachable_policy"] = training::ReachablePolicyName(r.reachable);
  d["unseen_rows_policy"] = training::UnseenRowsPolicyName(r.unseen);
  d["unseen_rows"] = r.unseen_rows;
  d["unseen_wanted_share"] = r.unseen_wanted_share;
  d["unseen_client_share"] = r.unseen_client_share;
  d["reference_quality"] = r.reference.value;
  d["reference"] = EstimateDict(r.reference);
  d["reference_per_seed"] = r.reference_per_seed;
  d["no_rows_quality"] = r.no_rows.value;
  d["no_rows"] = EstimateDict(r.no_rows);
  d["worth"] = EstimateDict(r.worth);
  d["worth_per_seed"] = r.worth_per_seed;
  d["claim_supported"] = r.claim_supported;
  d["claim_note"] = r.claim_note;
  d["chosen"] = r.chosen;
  d["baseline"] = r.baseline;
  d["chosen_all_reachable"] = r.chosen_all_reachable;
  d["chosen_per_seed"] = r.chosen_per_seed;
  d["baseline_per_seed"] = r.baseline_per_seed;
  d["compute_reduction"] = Optional(r.Reduction());
  d["compute_reduction_all_reachable"] = Optional(r.ReductionAllReachable());
  py::list per_seed;
  for (const auto& reduction : r.ReductionPerSeed()) per_seed.append(Optional(reduction));
  d["compute_reduction_per_seed"] = per_seed;
  d["points"] = points;
  d["summary_json"] = training::SweepSummaryJson("sweep", workload, r, "");
  return d;
}

void RegisterWorkload(py::module_& m) {
  using training::Workload;
  py::class_<Workload, std::shared_ptr<Workload>>(m, "Workload")
      .def_readonly("name", &Workload::name)
      .def_property_readonly(
          "kind",
          [](const Workload& w) {
            return w.kind == training::WorkloadKind::kLanguage ? "language" : "recommendation";
          })
      .def_readonly("num_rows", &Workload::num_rows)
      .def_readonly("row_words", &Workload::row_words)
      .def_property_readonly("train_requests",
                             [](const Workload& w) { return RequestList(w.train_requests); })
      .def_property_readonly("validation_requests",
                             [](const Workload& w) { return RequestList(w.validation_requests); })
      .def_readonly("train_clients", &Workload::train_clients)
      .def_readonly("validation_clients", &Workload::validation_clients)
      .def("samples", [](const Workload& w, bool validation) {
        const auto& samples = validation ? w.validation_samples : w.train_samples;
        std::vector<int64_t> history, offsets, items;
        std::vector<float> history_labels, labels;
        for (const auto& s : samples) {
          offsets.push_back(static_cast<int64_t>(history.size()));
          history.insert(history.end(), s.history.begin(), s.history.end());
          history_labels.insert(history_labels.end(), s.history_labels.begin(),
                                s.history_labels.end());
          items.push_back(s.item);
          labels.push_back(s.label);
        }
        py::dict d;
        d["history"] = py::array_t<int64_t>(history.size(), history.data());
        d["offsets"] = py::array_t<int64_t>(offsets.size(), offsets.data());
        d["history_labels"] = py::array_t<float>(history_labels.size(), history_labels.data());
        d["items"] = py::array_t<int64_t>(items.size(), items.data());
        d["labels"] = py::array_t<float>(labels.size(), labels.data());
        return d;
      });
  m.def(
      "load_workload",
      [](const std::string& preset, const std::string& data_dir, const std::string& interactions,
         const std::vector<std::string>& columns, float positive_threshold, const std::string& text,
         int history, int vocab, int window, int dim) {
        training::WorkloadOptions o;
        o.preset = preset;
        o.data_dir = data_dir;
        o.interactions = interactions;
        o.columns = {columns.at(0), columns.at(1), columns.at(2), columns.at(3)};
        o.positive_threshold = positive_threshold;
        o.text = text;
        o.history_length = history;
        o.vocabulary_size = vocab;
        o.window_length = window;
        o.embedding_dim = dim;
        py::gil_scoped_release release;
        return std::make_shared<Workload>(ValueOrThrow(training::LoadWorkload(o)));
      },
      py::arg("preset"), py::arg("data_dir"), py::arg("interactions"), py::arg("columns"),
      py::arg("positive_threshold"), py::arg("text"), py::arg("history"), py::arg("vocab"),
      py::arg("window"), py::arg("dim"));
}

}  // namespace

void RegisterCodesign(py::module_& m) {
  RegisterWorkload(m);
  m.def(
      "build_profile",
      [](const Array<int32_t>& flat, const Array<int64_t>& offsets, int32_t num_rows, int top_k) {
        const std::vector<RowRequest> requests = Requests(flat, offsets);
        AccessProfile p;
        {
          py::gil_scoped_release release;
          p = training::BuildProfile(requests, num_rows, top_k);
        }
        return py::make_tuple(p.num_requests,
                              py::array_t<int64_t>(p.frequency.size(), p.frequency.data()),
                              p.co_accessed);
      },
      py::arg("flat"), py::arg("offsets"), py::arg("num_rows"), py::arg("top_k"));
  m.def(
      "design_layout",
      [](const Array<int64_t>& frequency, const std::vector<std::vector<int32_t>>& co_accessed,
         int64_t num_requests, int32_t row_words, double hot_fraction, int32_t hot_bins,
         int32_t hot_rounds, int32_t cold_bins, int32_t cold_rounds, int32_t colocation,
         uint64_t seed) {
        const AccessProfile profile = Profile(frequency, co_accessed, num_requests);
        const training::LayoutChoice choice{hot_fraction, hot_bins,    hot_rounds,
                                            cold_bins,    cold_rounds, colocation};
        return std::make_shared<Layout>(ValueOrThrow(training::DesignLayout(
            profile, row_words, choice, embedding::LayoutSeedFromU64(seed))));
      },
      py::arg("frequency"), py::arg("co_accessed"), py::arg("num_requests"), py::arg("row_words"),
      py::arg("hot_fraction"), py::arg("hot_bins"), py::arg("hot_rounds"), py::arg("cold_bins"),
      py::arg("cold_rounds"), py::arg("colocation"), py::arg("seed"));
  m.def(
      "simulate",
      [](const Layout& layout, const Array<int32_t>& flat, const Array<int64_t>& offsets,
         double backend_words_per_s) {
        const std::vector<RowRequest> requests = Requests(flat, offsets);
        training::SimulationResult s;
        {
          py::gil_scoped_release release;
          s = ValueOrThrow(training::Simulate(layout, requests, backend_words_per_s));
        }
        py::dict d = SimulationDict(s);
        d["missing"] = RequestList(s.missing);
        return d;
      },
      py::arg("layout"), py::arg("flat"), py::arg("offsets"), py::arg("backend_words_per_s"));
  m.def("default_grid", [](bool quick) { return GridDict(training::SweepGrid::Default(quick)); });
  m.def(
      "sweep",
      [](const Array<int64_t>& frequency, const std::vector<std::vector<int32_t>>& co_accessed,
         int64_t num_requests, int32_t row_words, const Array<int32_t>& flat,
         const Array<int64_t>& offsets, const std::vector<int32_t>& clients, const py::dict& grid,
         uint64_t seed, double backend_words_per_s, int64_t max_bytes, double min_fetched_share,
         bool allow_unreachable_rows, const std::string& unseen_rows, double tolerance,
         int bootstrap, uint64_t bootstrap_seed, int threads, const py::list& models,
         std::function<void(std::string, size_t, size_t)> progress, const std::string& workload,
         const std::string& csv_path, const std::string& png_path) {
        const AccessProfile profile = Profile(frequency, co_accessed, num_requests);
        training::ValidationSet validation{Requests(flat, offsets), clients};
        if (validation.clients.empty()) {
          for (size_t i = 0; i < validation.requests.size(); ++i) {
            validation.clients.push_back(static_cast<int32_t>(i));
          }
        }
        training::SweepOptions options;
        options.seed = embedding::LayoutSeedFromU64(seed);
        options.backend_words_per_s = backend_words_per_s;
        options.max_bytes_per_inference = max_bytes;
        options.min_fetched_share = min_fetched_share;
        options.reachable = allow_unreachable_rows ? training::ReachablePolicy::kOptIn
                                                   : training::ReachablePolicy::kAll;
        options.unseen = ValueOrThrow(training::ParseUnseenRowsPolicy(unseen_rows));
        options.tolerance = tolerance;
        options.bootstrap_replicates = bootstrap;
        options.bootstrap_seed = bootstrap_seed;
        options.threads = threads;
        if (progress) {
          options.progress = [&progress](const char* stage, size_t done, size_t total) {
            py::gil_scoped_acquire gil;
            progress(stage, done, total);
          };
        }
        std::vector<std::unique_ptr<PyQualityModel>> owned;
        std::vector<training::QualityModel*> seeds;
        for (const py::handle model : models) {
          owned.push_back(
              std::make_unique<PyQualityModel>(py::reinterpret_borrow<py::object>(model)));
          seeds.push_back(owned.back().get());
        }
        const training::SweepGrid g = Grid(grid);
        absl::StatusOr<training::SweepResult> result;
        {
          py::gil_scoped_release release;
          result = training::Sweep(profile, row_words, validation, g, options, seeds);
        }
        for (const auto& model : owned) model->RethrowError();
        ThrowIfError(result.status());
        if (!csv_path.empty()) {
          py::gil_scoped_release release;
          {
            std::ofstream csv(csv_path);
            training::WriteSweepCsv(*result, csv);
            if (!csv) {
              throw StatusError(absl::InternalError(absl::StrCat("cannot write ", csv_path)));
            }
          }
          if (!png_path.empty()) {
            ThrowIfError(training::PlotSweep(*result, workload, csv_path, png_path));
          }
        }
        return SweepDict(*result, workload);
      },
      py::arg("frequency"), py::arg("co_accessed"), py::arg("num_requests"), py::arg("row_words"),
      py::arg("flat"), py::arg("offsets"), py::arg("clients"), py::arg("grid"), py::arg("seed"),
      py::arg("backend_words_per_s"), py::arg("max_bytes"), py::arg("min_fetched_share"),
      py::arg("allow_unreachable_rows"), py::arg("unseen_rows"), py::arg("tolerance"),
      py::arg("bootstrap"), py::arg("bootstrap_seed"), py::arg("threads"), py::arg("models"),
      py::arg("progress"), py::arg("workload"), py::arg("csv_path"), py::arg("png_path"));
}

}  // namespace veil::python
