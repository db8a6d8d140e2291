// TrainModel for builds without libtorch (VEIL_ENABLE_TORCH=OFF): the co-design commands still
// work, with the fetched share as their quality measure.
#include "absl/status/status.h"
#include "training_tools/models.h"

namespace veil::training {

absl::StatusOr<std::unique_ptr<WorkloadModel>> TrainModel(const Workload&, const TrainOptions&) {
  return absl::UnimplementedError("veil was built without libtorch: no model training");
}

absl::StatusOr<std::vector<std::unique_ptr<WorkloadModel>>> TrainModels(
    const Workload&, const TrainOptions&, const std::vector<uint64_t>&) {
  return absl::UnimplementedError("veil was built without libtorch: no model training");
}

absl::StatusOr<Outcomes> LanguageOutcomesWithTorch(const WorkloadModel&,
                                                   absl::Span<const ExampleQuery>) {
  return absl::UnimplementedError("veil was built without libtorch: no model");
}

absl::StatusOr<std::vector<float>> PredictRecommendations(
    WorkloadModel&, const std::vector<std::vector<int32_t>>&) {
  return absl::UnimplementedError("veil was built without libtorch: no model");
}

}  // namespace veil::training
