#include "training_tools/data/movielens.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "training_tools/data/r_serialize.h"

namespace veil::training {
namespace {

// Column `name` of the data frame as 64-bit integers (R stores ids as integer and timestamps as
// integer or double depending on the package version).
absl::StatusOr<std::vector<int64_t>> IntegerColumn(const RObject& frame, const std::string& name,
                                                   size_t rows) {
  const RObject* column = frame.Element(name);
  if (column == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("movielens: no column ", name));
  }
  if (column->Length() != rows) {
    return absl::InvalidArgumentError(absl::StrCat("movielens: column ", name, " has ",
                                                   column->Length(), " rows, expected ", rows));
  }
  std::vector<int64_t> values(rows);
  for (size_t i = 0; i < rows; ++i) {
    if (column->type == RType::kInteger) {
      if (column->ints[i] == kRNaInteger) {
        return absl::InvalidArgumentError(absl::StrCat("movielens: NA in ", name, " row ", i + 1));
      }
      values[i] = column->ints[i];
    } else if (column->type == RType::kReal && std::isfinite(column->reals[i])) {
      values[i] = static_cast<int64_t>(column->reals[i]);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("movielens: column ", name, " is not numeric or has NA at row ", i + 1));
    }
  }
  return values;
}

}  // namespace

absl::StatusOr<MovieLensRatings> LoadMovieLens(const std::string& data_dir) {
  auto frame = ReadLazyLoadObject(data_dir + "/Rdata", "movielens");
  if (!frame.ok()) {
    if (absl::IsNotFound(frame.status())) {
      return absl::NotFoundError(
          absl::StrCat(frame.status().message(), " (run scripts/fetch-data to fetch MovieLens)"));
    }
    return frame.status();
  }
  if (frame->type != RType::kList) {
    return absl::InvalidArgumentError("movielens: the object is not a data frame");
  }
  const RObject* rating_column = frame->Element("rating");
  if (rating_column == nullptr || rating_column->type != RType::kReal) {
    return absl::InvalidArgumentError("movielens: no numeric column rating");
  }
  const size_t rows = rating_column->reals.size();
  auto users = IntegerColumn(*frame, "userId", rows);
  if (!users.ok()) return users.status();
  auto movies = IntegerColumn(*frame, "movieId", rows);
  if (!movies.ok()) return movies.status();
  auto timestamps = IntegerColumn(*frame, "timestamp", rows);
  if (!timestamps.ok()) return timestamps.status();

  MovieLensRatings result;
  result.ratings.resize(rows);
  absl::flat_hash_set<int32_t> distinct_users, distinct_movies;
  for (size_t i = 0; i < rows; ++i) {
    const double stars = rating_column->reals[i];
    if (!(stars >= 0 && stars <= 5)) {
      return absl::InvalidArgumentError(
          absl::StrCat("movielens: rating ", stars, " out of [0, 5] at row ", i + 1));
    }
    Rating& r = result.ratings[i];
    r.user_id = static_cast<int32_t>((*users)[i]);
    r.movie_id = static_cast<int32_t>((*movies)[i]);
    r.rating = static_cast<float>(stars);
    r.timestamp = (*timestamps)[i];
    distinct_users.insert(r.user_id);
    distinct_movies.insert(r.movie_id);
  }
  result.num_users = static_cast<int32_t>(distinct_users.size());
  result.num_movies = static_cast<int32_t>(distinct_movies.size());
  return result;
}

DenseIndex DenseIndex::FromIds(const std::vector<int32_t>& ids) {
  DenseIndex index;
  index.ids_ = ids;
  std::sort(index.ids_.begin(), index.ids_.end());
  index.ids_.erase(std::unique(index.ids_.begin(), index.ids_.end()), index.ids_.end());
  index.rows_.reserve(index.ids_.size());
  for (size_t row = 0; row < index.ids_.size(); ++row) {
    index.rows_[index.ids_[row]] = static_cast<int32_t>(row);
  }
  return index;
}

DenseIndex DenseIndex::FromMovies(const std::vector<Rating>& ratings) {
  std::vector<int32_t> ids;
  ids.reserve(ratings.size());
  for (const Rating& r : ratings) ids.push_back(r.movie_id);
  return FromIds(ids);
}

int32_t DenseIndex::RowOf(int32_t id) const {
  auto it = rows_.find(id);
  return it == rows_.end() ? -1 : it->second;
}

std::vector<float> QuickFactorize(const std::vector<Rating>& ratings, const DenseIndex& items,
                                  int dim, int epochs, uint64_t seed) {
  constexpr float kLearningRate = 0.01f;
  constexpr float kL2 = 0.05f;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> init(0.0f, 0.1f);

  std::vector<int32_t> user_ids;
  for (const Rating& r : ratings) user_ids.push_back(r.user_id);
  const DenseIndex users = DenseIndex::FromIds(user_ids);

  struct Sample {
    int32_t user, item;
    float rating;
  };
  std::vector<Sample> samples;
  double sum = 0;
  for (const Rating& r : ratings) {
    const int32_t item = items.RowOf(r.movie_id);
    if (item < 0) continue;
    samples.push_back({users.RowOf(r.user_id), item, r.rating});
    sum += r.rating;
  }
  const float mean = samples.empty() ? 0.0f : static_cast<float>(sum / samples.size());

  std::vector<float> user_vectors(static_cast<size_t>(users.size()) * dim);
  std::vector<float> item_vectors(static_cast<size_t>(items.size()) * dim);
  for (float& v : user_vectors) v = init(rng);
  for (float& v : item_vectors) v = init(rng);

  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(samples.begin(), samples.end(), rng);
    for (const Sample& s : samples) {
      float* u = &user_vectors[static_cast<size_t>(s.user) * dim];
      float* v = &item_vectors[static_cast<size_t>(s.item) * dim];
      const float error = s.rating - mean - std::inner_product(u, u + dim, v, 0.0f);
      for (int k = 0; k < dim; ++k) {
        const float uk = u[k];
        u[k] += kLearningRate * (error * v[k] - kL2 * uk);
        v[k] += kLearningRate * (error * uk - kL2 * v[k]);
      }
    }
  }
  return item_vectors;
}

}  // namespace veil::training
