// MovieLens ratings (the "small, latest" set shipped as dslabs' `movielens` data frame), read from
// the R lazy-load database that scripts/fetch-data unpacks into data/movielens/ (Rdata.rdb/.rdx)
// with this project's own R reader (r_serialize.h) — R is not needed.
//
// Also a small plain-C++ matrix factorisation (QuickFactorize) that turns the ratings into item
// vectors, for demos and tests that need a realistic embedding table without libtorch.
#ifndef VEIL_TRAINING_TOOLS_DATA_MOVIELENS_H_
#define VEIL_TRAINING_TOOLS_DATA_MOVIELENS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace veil::training {

struct Rating {
  int32_t user_id = 0;
  int32_t movie_id = 0;
  float rating = 0;       // 0.5 … 5 stars
  int64_t timestamp = 0;  // seconds since 1970
};

struct MovieLensRatings {
  std::vector<Rating> ratings;  // in the data set's order
  int32_t num_users = 0;        // distinct user ids (671 in dslabs)
  int32_t num_movies = 0;       // distinct movie ids (9,066 in dslabs)
};

// Loads `movielens` from `<data_dir>/Rdata.rdb` and `.rdx` (data_dir is usually
// "<repo>/data/movielens"). Returns NOT_FOUND if the files are missing (run scripts/fetch-data),
// INVALID_ARGUMENT if they are corrupt or the data frame lacks the columns userId, movieId,
// rating, timestamp or has NA in them.
absl::StatusOr<MovieLensRatings> LoadMovieLens(const std::string& data_dir);

// A dense numbering of sparse ids (movie ids → rows 0..n-1 in increasing id order), so that an
// embedding table row can be mapped back to its item and vice versa.
class DenseIndex {
 public:
  // Numbers the distinct values of `ids` in increasing order.
  static DenseIndex FromIds(const std::vector<int32_t>& ids);
  // Numbers the movies of `ratings`.
  static DenseIndex FromMovies(const std::vector<Rating>& ratings);

  int32_t size() const { return static_cast<int32_t>(ids_.size()); }
  // The id stored in `row` (row < size()).
  int32_t IdOf(int32_t row) const { return ids_[row]; }
  // The row of `id`, or -1 if the id is not indexed.
  int32_t RowOf(int32_t id) const;
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;
  absl::flat_hash_map<int32_t, int32_t> rows_;
};

// Factorises ratings ≈ global mean + user·item by SGD (learning rate 0.01, L2 0.05, shuffled
// with `seed`) and returns the item vectors: items.size() rows of `dim` floats, row r for the
// movie items.IdOf(r). Ratings of movies not in `items` are ignored. Deterministic for a seed;
// about 1 s for MovieLens with dim 32 and 10 epochs.
std::vector<float> QuickFactorize(const std::vector<Rating>& ratings, const DenseIndex& items,
                                  int dim, int epochs, uint64_t seed);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_DATA_MOVIELENS_H_
