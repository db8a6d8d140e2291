// PrivateEmbeddingBag: torch::nn::EmbeddingBag whose rows are fetched privately instead of being
// held locally: from two veil servers (a thin torch module over Client::LookupLayout), or from
// ONE lattice PIR server (any of LweClient's protocols, LweClient::Lookup). Below it,
// PrivatePooledEmbeddingBag pools through one bfv-bag server instead (BagClient).
//
// Over LWE there is no layout and no missing row: the distinct rows of an inference are fetched
// exactly, padded with random distinct rows (libsodium) to a multiple of `pad_rows`, so that the
// server sees ceil(distinct / pad_rows) * pad_rows queries, not the count.
//
// Each forward is one inference: the distinct rows of `input` are fetched with one layout lookup
// (always exactly `rounds` keys for every bin of every table, dummies included, whatever is
// wanted; pir/batch/), rows the planner could not serve are replaced by the default row, and the
// bags are pooled like torch::nn::EmbeddingBag (sum, mean or max, with per_sample_weights for
// sum). last_missing_mask() says which elements of the last input were replaced.
//
// A model that looks up the same rows several ways in one inference (a mean bag, a weighted bag
// and a single candidate row, say) calls Fetch once and then Pool / Embed on its result, so that
// the inference is one plan and the servers see one constant-size request.
//
// The servers must serve the layout's physical table of the model's rows in fp32 (bit-exact).
// Errors (a server down, a wrong table) surface as c10::Error from forward, and as absl::Status
// from Fetch.
#ifndef VEIL_MOBILE_CLIENT_PRIVATE_EMBEDDING_BAG_H_
#define VEIL_MOBILE_CLIENT_PRIVATE_EMBEDDING_BAG_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/layout.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "mobile_client/lwe_client.h"
#include "pir/batch/planner.h"

namespace veil::client {

// torch::nn::EmbeddingBagOptions' shape options (no max_norm, sparse or padding_idx: the rows
// are not trained on the device).
struct PrivateEmbeddingBagOptions {
  PrivateEmbeddingBagOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  // From torch::nn::EmbeddingBagOptions (its shape, mode and include_last_offset). Throws
  // c10::Error for max_norm, sparse or padding_idx, which have no meaning for fetched rows.
  PrivateEmbeddingBagOptions(const torch::nn::EmbeddingBagOptions& o)  // NOLINT: implicit
      : num_embeddings_(o.num_embeddings()),
        embedding_dim_(o.embedding_dim()),
        mode_(o.mode()),
        include_last_offset_(o.include_last_offset()) {
    TORCH_CHECK(!o.max_norm() && !o.sparse() && !o.padding_idx() && !o._weight().defined(),
                "PrivateEmbeddingBag: max_norm, sparse, padding_idx and _weight are not supported");
  }
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
  TORCH_ARG(torch::nn::EmbeddingBagMode, mode) = torch::kMean;
  TORCH_ARG(bool, include_last_offset) = false;
};

// The rows of one inference, fetched under one plan.
struct PrivateRows {
  std::vector<int64_t> rows;          // the wanted rows, sorted and distinct
  torch::Tensor weight;               // [rows.size() + 1, dim]: each wanted row (the default
                                      // row where missing), then the default row
  std::vector<uint8_t> missing;       // per rows[i]: 1 if not fetched
  std::vector<int32_t> missing_rows;  // the missing rows, sorted
  batch::FetchPlan plan;              // what was sent (fetches include the dummies)
  CallStats call;                     // the lookup's cost, both servers

  // Indices of `input`'s rows in `weight` (same shape). Throws c10::Error for a row that was not
  // wanted in this fetch.
  torch::Tensor Local(const torch::Tensor& input) const;
  // Whether each element of `input` is a missing row (bool, same shape).
  torch::Tensor MissingMask(const torch::Tensor& input) const;
};

class PrivateEmbeddingBagImpl : public torch::nn::Cloneable<PrivateEmbeddingBagImpl> {
 public:
  // `client` must be connected to servers of the physical table of `layout` (fp32, entry_words()
  // floats per row); `default_row` ([dim] or [1, dim]) replaces missing rows. Throws c10::Error
  // if the shapes of the options, layout, table and default row disagree.
  PrivateEmbeddingBagImpl(const PrivateEmbeddingBagOptions& options, std::shared_ptr<Client> client,
                          std::shared_ptr<const embedding::Layout> layout,
                          torch::Tensor default_row);

  // `client` connected to an LWE server (any protocol) of the model's rows (any row format,
  // dequantized); each fetch pads its distinct rows to a multiple of `pad_rows` (>= 1). Throws
  // c10::Error if the shapes of the options, table and default row disagree.
  PrivateEmbeddingBagImpl(const PrivateEmbeddingBagOptions& options,
                          std::shared_ptr<LweClient> client, torch::Tensor default_row,
                          int64_t pad_rows = 32);

  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // EmbeddingBag's call: `input` 1-D with `offsets` (bag starts), or 2-D [bags, n] without
  // them; `per_sample_weights` like input, sum mode only. Returns [bags, dim].
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& offsets = {},
                        const torch::Tensor& per_sample_weights = {});

  // Plans and fetches `rows` (any order, duplicates allowed, each in [0, num_embeddings)) as one
  // inference. Returns INVALID_ARGUMENT for a row out of range, the planner's and the client's
  // errors, and INTERNAL if a fetched entry does not hold the row the plan says.
  absl::StatusOr<PrivateRows> Fetch(absl::Span<const int64_t> rows);

  // Pools already fetched rows like forward (with this module's mode unless `mode` is given),
  // and records the missing mask of `input`.
  torch::Tensor Pool(const PrivateRows& fetched, const torch::Tensor& input,
                     const torch::Tensor& offsets = {},
                     const torch::Tensor& per_sample_weights = {},
                     const c10::optional<torch::nn::EmbeddingBagMode>& mode = c10::nullopt);
  // Single rows (torch::nn::Embedding's call) out of a fetch: input.sizes() + [dim].
  torch::Tensor Embed(const PrivateRows& fetched, const torch::Tensor& input) const;

  // Of the last forward or Pool: which elements of its input were replaced by the default row
  // (bool, the input's shape), and the missing rows of its fetch.
  const torch::Tensor& last_missing_mask() const { return last_missing_mask_; }
  const std::vector<int32_t>& last_missing_rows() const { return last_missing_rows_; }
  // The last fetch's cost (bytes on the sockets, keys per server).
  const CallStats& last_call() const { return last_call_; }

  // The layout (two-server modules only).
  const embedding::Layout& layout() const { return *layout_; }

  PrivateEmbeddingBagOptions options;
  torch::Tensor default_row;  // buffer [dim]

 private:
  // Fetch over LWE: the distinct rows, padded.
  absl::StatusOr<PrivateRows> FetchLwe(absl::Span<const int64_t> wanted);

  std::shared_ptr<Client> client_;  // two servers, with layout_
  std::shared_ptr<const embedding::Layout> layout_;
  std::shared_ptr<LweClient> lwe_client_;  // or one LWE server
  int64_t pad_rows_ = 0;
  torch::Tensor last_missing_mask_;
  std::vector<int32_t> last_missing_rows_;
  CallStats last_call_;
};
TORCH_MODULE(PrivateEmbeddingBag);

// PrivatePooledEmbeddingBag: torch::nn::EmbeddingBag in sum or mean mode whose bags are pooled by
// ONE bfv-bag server (BagClient): each bag goes up as an encrypted weight vector over the whole
// table and comes back as its encrypted pooled row, so the server learns nothing of the bags
// (not even which are empty: an empty bag is sent as a bag of weight 0) and there are no missing
// rows. The table must be fixed-point.
//
// Exactness: per_sample_weights (sum mode, as in torch) are rounded to multiples of
// 2^-weight_frac_bits; the output is then the float nearest the exact pooled sum of the table's
// fixed-point values with those weights (mean: divided by the bag's size), computed over
// integers on the server.
struct PrivatePooledEmbeddingBagOptions {
  PrivatePooledEmbeddingBagOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
  TORCH_ARG(torch::nn::EmbeddingBagMode, mode) = torch::kMean;  // kSum or kMean
  TORCH_ARG(bool, include_last_offset) = false;
  TORCH_ARG(int, weight_frac_bits) = 16;
};

class PrivatePooledEmbeddingBagImpl : public torch::nn::Cloneable<PrivatePooledEmbeddingBagImpl> {
 public:
  // `client` must be connected to a bfv-bag server of a num_embeddings x embedding_dim table.
  // Throws c10::Error if the shapes disagree, for mode kMax, or weight_frac_bits outside [0, 30].
  PrivatePooledEmbeddingBagImpl(const PrivatePooledEmbeddingBagOptions& options,
                                std::shared_ptr<BagClient> client);

  void reset() override {}
  void pretty_print(std::ostream& stream) const override;

  // EmbeddingBag's call: `input` 1-D with `offsets` (bag starts), or 2-D [bags, n] without them;
  // `per_sample_weights` like input, sum mode only. Returns [bags, dim] (float). Throws
  // c10::Error with the client's error (a server down, weights too large for an exact sum).
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& offsets = {},
                        const torch::Tensor& per_sample_weights = {});
  // forward with the client's failure returned as its status (UNAVAILABLE for a server down,
  // DATA_LOSS for a sum that fails its tag, ...) rather than thrown; bad arguments still throw
  // c10::Error.
  absl::StatusOr<torch::Tensor> TryForward(const torch::Tensor& input,
                                           const torch::Tensor& offsets = {},
                                           const torch::Tensor& per_sample_weights = {});

  // The last forward's cost (bytes on the socket, query ciphertexts).
  const CallStats& last_call() const { return last_call_; }

  PrivatePooledEmbeddingBagOptions options;

 private:
  std::shared_ptr<BagClient> client_;
  CallStats last_call_;
};
TORCH_MODULE(PrivatePooledEmbeddingBag);

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_PRIVATE_EMBEDDING_BAG_H_
