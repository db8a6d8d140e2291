// veil-private-inference: the recommendation model on the device, its embedding rows fetched
// privately from two veil servers under a batch-PIR layout, checked against the simulation.
//
//   1. loads the workload (MovieLens or a CSV log) and trains the model (veil-codesign train);
//   2. builds the layout from the training split's profile (or reads --layout) and writes the
//      servers' table: the model's embedding table in the layout's bins and entries;
//   3. starts two veil-server processes on loopback with that table;
//   4. runs the first --requests validation inferences on the client (PrivateEmbeddingBag);
//   5. simulates the same requests (planner + model with missing rows → default row) and
//      compares: the same missing rows and the same predictions.
// Prints one JSON line; exits 1 if the device and the simulation disagree.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "embedding/layout_table.h"
#include "tools/flags.h"
#include "tools/launcher.h"
#include "training_tools/private_inference.h"
#include "training_tools/simulate.h"

ABSL_FLAG(std::string, workload, "movielens", "preset (movielens), unless --interactions is set");
ABSL_FLAG(std::string, interactions, "", "CSV interaction log (user,item,timestamp,label)");
ABSL_FLAG(std::string, label_column, "rating", "CSV column of the label or rating");
ABSL_FLAG(double, positive_threshold, 4, "label at or above which an interaction is a click");
ABSL_FLAG(std::string, data_dir, VEIL_DEFAULT_DATA_DIR, "where scripts/fetch-data put the data");
ABSL_FLAG(uint64_t, seed, 1, "seed of the layout permutation and of training");
ABSL_FLAG(int, epochs, 5, "training epochs");
ABSL_FLAG(int, threads, 2, "torch threads");
ABSL_FLAG(double, hot_fraction, 0.2, "layout: share of rows in the hot table");
ABSL_FLAG(int, hot_bins, 64, "layout: bins of the hot table");
ABSL_FLAG(int, hot_rounds, 1, "layout: keys per hot bin per inference");
ABSL_FLAG(int, cold_bins, 16, "layout: bins of the cold table");
ABSL_FLAG(int, cold_rounds, 1, "layout: keys per cold bin per inference");
ABSL_FLAG(int, colocation, 0, "layout: co-located rows per entry (c)");
ABSL_FLAG(std::string, layout, "", "layout file to use (else built from the flags)");
ABSL_FLAG(int, requests, 50, "validation inferences to run on the device");
ABSL_FLAG(std::string, work_dir, "",
          "folder for the table, layout and server logs (default: a "
          "temporary folder)");
ABSL_FLAG(double, tolerance, 1e-4, "largest allowed |device − simulation| logit difference");

namespace {

using namespace veil;            // NOLINT
using namespace veil::training;  // NOLINT
using namespace veil::client;    // NOLINT

// The public placement key of --seed.
std::array<uint8_t, 16> LayoutSeed() {
  return embedding::LayoutSeedFromU64(absl::GetFlag(FLAGS_seed));
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "veil-private-inference: %s\n", status.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  veil::tools::ParseFlags(
      argc, argv,
      "veil-private-inference: runs the recommendation model on the client with its embeddings "
      "fetched privately from two veil servers under a batch-PIR layout, and checks it against "
      "the simulation.\n\nexample:\n  veil-private-inference --workload=movielens "
      "--requests=200");

  WorkloadOptions workload_options;
  if (absl::GetFlag(FLAGS_interactions).empty()) {
    workload_options.preset = absl::GetFlag(FLAGS_workload);
    workload_options.data_dir = absl::GetFlag(FLAGS_data_dir);
  } else {
    workload_options.interactions = absl::GetFlag(FLAGS_interactions);
    workload_options.columns.label = absl::GetFlag(FLAGS_label_column);
  }
  workload_options.positive_threshold = static_cast<float>(absl::GetFlag(FLAGS_positive_threshold));
  auto workload = LoadWorkload(workload_options);
  if (!workload.ok()) return Fail(workload.status());
  if (workload->kind != WorkloadKind::kRecommendation) {
    return Fail(absl::InvalidArgumentError("a recommendation workload is needed"));
  }

  const size_t requests = std::min<size_t>(std::max(absl::GetFlag(FLAGS_requests), 1),
                                           workload->validation_samples.size());
  TrainOptions train;
  train.seed = absl::GetFlag(FLAGS_seed);
  train.epochs = absl::GetFlag(FLAGS_epochs);
  train.threads = absl::GetFlag(FLAGS_threads);
  train.max_validation_examples = requests;
  std::fprintf(stderr, "training the model...\n");
  auto model = TrainModel(*workload, train);
  if (!model.ok()) return Fail(model.status());

  absl::StatusOr<embedding::Layout> layout = absl::UnknownError("");
  if (!absl::GetFlag(FLAGS_layout).empty()) {
    layout = embedding::Layout::ReadFile(absl::GetFlag(FLAGS_layout));
  } else {
    const AccessProfile profile = BuildProfile(workload->train_requests, workload->num_rows, 8);
    const LayoutChoice choice{absl::GetFlag(FLAGS_hot_fraction), absl::GetFlag(FLAGS_hot_bins),
                              absl::GetFlag(FLAGS_hot_rounds),   absl::GetFlag(FLAGS_cold_bins),
                              absl::GetFlag(FLAGS_cold_rounds),  absl::GetFlag(FLAGS_colocation)};
    layout = DesignLayout(profile, workload->row_words, choice, LayoutSeed());
  }
  if (!layout.ok()) return Fail(layout.status());

  std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  if (work_dir.empty()) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "veil-private-inference-XXXXXX").string();
    if (!mkdtemp(pattern.data())) return Fail(absl::InternalError("cannot make a work folder"));
    work_dir = pattern;
  }
  std::filesystem::create_directories(work_dir);
  const std::string table_path = work_dir + "/layout-table.veil";
  if (auto status = layout->WriteFile(work_dir + "/layout.veillayout"); !status.ok()) {
    return Fail(status);
  }
  if (auto status = WriteLayoutTable(**model, *layout, table_path); !status.ok()) {
    return Fail(status);
  }

  std::unique_ptr<tools::ServerProcess> servers[2];
  for (int party = 0; party < 2; ++party) {
    tools::ServerProcessOptions o;
    o.binary = tools::ServerBinaryNextToSelf();
    o.party = party;
    o.table_path = table_path;
    o.log_path = absl::StrFormat("%s/server%d.log", work_dir, party);
    auto started = tools::ServerProcess::Start(o);
    if (!started.ok()) return Fail(started.status());
    servers[party] = std::move(*started);
  }
  ClientOptions client_options;
  client_options.server0 = servers[0]->address();
  client_options.server1 = servers[1]->address();
  client_options.timeout = absl::Seconds(30);
  auto client = Client::Connect(client_options);
  if (!client.ok()) return Fail(client.status());

  std::fprintf(stderr, "running %zu inferences on the device...\n", requests);
  auto device = RunPrivateInference(**model, *workload, *layout,
                                    std::shared_ptr<Client>(std::move(*client)), requests);
  if (!device.ok()) return Fail(device.status());

  const std::vector<RowRequest> evaluated((*model)->evaluated_requests().begin(),
                                          (*model)->evaluated_requests().begin() + requests);
  auto simulation = Simulate(*layout, evaluated, 0);
  if (!simulation.ok()) return Fail(simulation.status());
  auto simulated = PredictRecommendations(**model, simulation->missing);
  if (!simulated.ok()) return Fail(simulated.status());

  size_t same_missing = 0, wanted = 0, missing = 0;
  double max_diff = 0;
  for (size_t i = 0; i < requests; ++i) {
    same_missing += device->missing[i] == simulation->missing[i];
    wanted += evaluated[i].size();
    missing += device->missing[i].size();
    max_diff = std::max(max_diff, std::abs(double{device->predictions[i]} - (*simulated)[i]));
  }
  // The device's predictions are compared with these one by one; the AUC is the simulation's.
  const double auc_simulated = (*model)->Evaluate(simulation->missing);
  const double auc_all_rows =
      (*model)->Evaluate(std::vector<std::vector<int32_t>>(simulation->missing.size()));
  const batch::PlanCost cost = batch::CostOf(*layout);
  const bool keys_constant = std::all_of(device->keys.begin(), device->keys.end(),
                                         [&](int64_t k) { return k == cost.keys; });
  const bool ok =
      same_missing == requests && max_diff <= absl::GetFlag(FLAGS_tolerance) && keys_constant;
  std::printf(
      "{\"workload\":\"%s\",\"requests\":%zu,\"wanted_rows\":%zu,\"missing_rows\":%zu,"
      "\"same_missing\":%zu,\"max_abs_logit_diff\":%.3g,\"auc\":%.4f,\"auc_all_rows\":%.4f,\"keys_"
      "per_inference\":%lld,"
      "\"keys_constant\":%s,\"bytes_up_per_inference\":%.0f,\"bytes_down_per_inference\":%.0f,"
      "\"ms_per_inference\":%.2f,\"physical_rows\":%llu,\"match\":%s}\n",
      workload->name.c_str(), requests, wanted, missing, same_missing, max_diff, auc_simulated,
      auc_all_rows, static_cast<long long>(cost.keys), keys_constant ? "true" : "false",
      static_cast<double>(device->bytes_up) / requests,
      static_cast<double>(device->bytes_down) / requests, 1e3 * device->seconds / requests,
      static_cast<unsigned long long>(embedding::PhysicalRows(*layout)), ok ? "true" : "false");
  return ok ? 0 : 1;
}
