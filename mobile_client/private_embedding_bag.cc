#include "mobile_client/private_embedding_bag.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "embedding/layout_table.h"

namespace veil::client {
namespace {

// Index of `row` in the sorted `rows`, or -1.
int64_t Find(const std::vector<int64_t>& rows, int64_t row) {
  auto it = std::lower_bound(rows.begin(), rows.end(), row);
  return it != rows.end() && *it == row ? it - rows.begin() : -1;
}

}  // namespace

torch::Tensor PrivateRows::Local(const torch::Tensor& input) const {
  auto flat = input.to(torch::kInt64).contiguous().reshape(-1);
  auto local = torch::empty_like(flat);
  const int64_t* in = flat.data_ptr<int64_t>();
  int64_t* out = local.data_ptr<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t index = Find(rows, in[i]);
    TORCH_CHECK(index >= 0, "PrivateEmbeddingBag: row ", in[i], " was not fetched");
    out[i] = missing[index] ? static_cast<int64_t>(rows.size()) : index;
  }
  return local.reshape(input.sizes());
}

torch::Tensor PrivateRows::MissingMask(const torch::Tensor& input) const {
  auto flat = input.to(torch::kInt64).contiguous().reshape(-1);
  auto mask = torch::zeros({flat.numel()}, torch::kBool);
  const int64_t* in = flat.data_ptr<int64_t>();
  bool* out = mask.data_ptr<bool>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t index = Find(rows, in[i]);
    out[i] = index < 0 || missing[index];
  }
  return mask.reshape(input.sizes());
}

PrivateEmbeddingBagImpl::PrivateEmbeddingBagImpl(const PrivateEmbeddingBagOptions& options_,
                                                 std::shared_ptr<Client> client,
                                                 std::shared_ptr<const embedding::Layout> layout,
                                                 torch::Tensor default_row_)
    : options(options_),
      default_row(std::move(default_row_)),
      client_(std::move(client)),
      layout_(std::move(layout)) {
  TORCH_CHECK(client_ && layout_, "PrivateEmbeddingBag: needs a client and a layout");
  TORCH_CHECK(options.num_embeddings() == layout_->num_rows(),
              "PrivateEmbeddingBag: ", options.num_embeddings(), " embeddings, the layout has ",
              layout_->num_rows(), " rows");
  TORCH_CHECK(options.embedding_dim() == layout_->params().row_words,
              "PrivateEmbeddingBag: dimension ", options.embedding_dim(),
              ", the layout's rows have ", layout_->params().row_words, " words");
  const TableInfo& table = client_->table();
  TORCH_CHECK(table.format == embedding::RowFormat::kFp32 &&
                  table.rows == static_cast<uint64_t>(embedding::PhysicalRows(*layout_)) &&
                  table.dim == static_cast<uint32_t>(layout_->entry_words()),
              "PrivateEmbeddingBag: the servers' table (", table.rows, " x ", table.dim,
              ") is not the layout's physical fp32 table (", embedding::PhysicalRows(*layout_),
              " x ", layout_->entry_words(), ")");
  reset();
}

PrivateEmbeddingBagImpl::PrivateEmbeddingBagImpl(const PrivateEmbeddingBagOptions& options_,
                                                 std::shared_ptr<LweClient> client,
                                                 torch::Tensor default_row_, int64_t pad_rows)
    : options(options_),
      default_row(std::move(default_row_)),
      lwe_client_(std::move(client)),
      pad_rows_(pad_rows) {
  TORCH_CHECK(lwe_client_, "PrivateEmbeddingBag: needs a client");
  TORCH_CHECK(pad_rows_ >= 1, "PrivateEmbeddingBag: pad_rows ", pad_rows_, " is not positive");
  const LweTableInfo& table = lwe_client_->table();
  TORCH_CHECK(table.rows == static_cast<uint64_t>(options.num_embeddings()) &&
                  table.dim == static_cast<uint32_t>(options.embedding_dim()),
              "PrivateEmbeddingBag: the server's table (", table.rows, " x ", table.dim,
              ") is not ", options.num_embeddings(), " x ", options.embedding_dim());
  reset();
}

void PrivateEmbeddingBagImpl::reset() {
  torch::Tensor row = default_row.defined()
                          ? default_row.detach().to(torch::kFloat32).reshape(-1).clone()
                          : torch::zeros({options.embedding_dim()});
  TORCH_CHECK(row.numel() == options.embedding_dim(), "PrivateEmbeddingBag: the default row has ",
              row.numel(), " values, not ", options.embedding_dim());
  default_row = register_buffer("default_row", row);
}

void PrivateEmbeddingBagImpl::pretty_print(std::ostream& stream) const {
  stream << "veil::client::PrivateEmbeddingBag(num_embeddings=" << options.num_embeddings()
         << ", embedding_dim=" << options.embedding_dim()
         << ", mode=" << torch::enumtype::get_enum_name(options.mode());
  if (layout_) {
    stream << ", keys_per_inference=" << batch::CostOf(*layout_).keys << ")";
  } else {
    stream << ", protocol=" << lwe_client_->table().protocol << ", pad_rows=" << pad_rows_ << ")";
  }
}

absl::StatusOr<PrivateRows> PrivateEmbeddingBagImpl::Fetch(absl::Span<const int64_t> wanted) {
  if (lwe_client_) return FetchLwe(wanted);
  std::vector<int32_t> rows32;
  rows32.reserve(wanted.size());
  for (int64_t row : wanted) {
    if (row < 0 || row >= options.num_embeddings()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PrivateEmbeddingBag: row ", row, " outside [0, ", options.num_embeddings(), ")"));
    }
    rows32.push_back(static_cast<int32_t>(row));
  }
  auto looked_up = client_->LookupLayout(*layout_, rows32);
  if (!looked_up.ok()) return looked_up.status();
  PrivateRows fetched;
  fetched.rows.assign(looked_up->rows.begin(), looked_up->rows.end());
  fetched.missing = std::move(looked_up->missing);
  fetched.plan = std::move(looked_up->plan);
  fetched.call = looked_up->call;
  fetched.missing_rows = fetched.plan.missing;
  const int64_t dim = options.embedding_dim();
  const int64_t n = static_cast<int64_t>(fetched.rows.size());
  fetched.weight = default_row.reshape({1, dim}).repeat({n + 1, 1}).contiguous();
  float* weight = fetched.weight.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (fetched.missing[i]) continue;
    std::memcpy(weight + i * dim, looked_up->values.data() + i * dim, sizeof(float) * dim);
  }
  last_call_ = fetched.call;
  return fetched;
}

absl::StatusOr<PrivateRows> PrivateEmbeddingBagImpl::FetchLwe(absl::Span<const int64_t> wanted) {
  const int64_t table_rows = options.num_embeddings();
  PrivateRows fetched;
  for (int64_t row : wanted) {
    if (row < 0 || row >= table_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("PrivateEmbeddingBag: row ", row, " outside [0, ", table_rows, ")"));
    }
  }
  fetched.rows.assign(wanted.begin(), wanted.end());
  std::sort(fetched.rows.begin(), fetched.rows.end());
  fetched.rows.erase(std::unique(fetched.rows.begin(), fetched.rows.end()), fetched.rows.end());
  const int64_t n = static_cast<int64_t>(fetched.rows.size());
  // Random distinct rows up to the next multiple of pad_rows (or the whole table).
  const int64_t padded =
      std::min(table_rows, std::max<int64_t>(1, (n + pad_rows_ - 1) / pad_rows_) * pad_rows_);
  std::vector<uint64_t> queried(fetched.rows.begin(), fetched.rows.end());
  std::vector<int64_t> taken = fetched.rows;  // sorted
  while (static_cast<int64_t>(queried.size()) < padded) {
    const int64_t row = static_cast<int64_t>(
        randombytes_uniform(static_cast<uint32_t>(std::min<int64_t>(table_rows, UINT32_MAX))));
    auto at = std::lower_bound(taken.begin(), taken.end(), row);
    if (at != taken.end() && *at == row) continue;
    taken.insert(at, row);
    queried.push_back(static_cast<uint64_t>(row));
  }
  // The wanted rows at random places among the dummies (the queries' order is encrypted anyway;
  // this keeps the calls' split from following the request).
  for (size_t i = queried.size(); i > 1; --i) {
    std::swap(queried[i - 1], queried[randombytes_uniform(static_cast<uint32_t>(i))]);
  }
  auto values = lwe_client_->Lookup(queried);
  if (!values.ok()) return values.status();
  const int64_t dim = options.embedding_dim();
  fetched.weight = default_row.reshape({1, dim}).repeat({n + 1, 1}).contiguous();
  float* weight = fetched.weight.data_ptr<float>();
  for (size_t q = 0; q < queried.size(); ++q) {
    const int64_t index = Find(fetched.rows, static_cast<int64_t>(queried[q]));
    if (index < 0) continue;  // a dummy
    std::memcpy(weight + index * dim, values->data() + q * dim, sizeof(float) * dim);
  }
  sodium_memzero(values->data(), values->size() * sizeof(float));
  fetched.missing.assign(n, 0);
  fetched.call = lwe_client_->last_call();
  last_call_ = fetched.call;
  return fetched;
}

torch::Tensor PrivateEmbeddingBagImpl::Pool(
    const PrivateRows& fetched, const torch::Tensor& input, const torch::Tensor& offsets,
    const torch::Tensor& per_sample_weights,
    const c10::optional<torch::nn::EmbeddingBagMode>& mode) {
  namespace F = torch::nn::functional;
  auto pooled = F::embedding_bag(fetched.Local(input), fetched.weight,
                                 F::EmbeddingBagFuncOptions()
                                     .offsets(offsets)
                                     .mode(mode ? *mode : options.mode())
                                     .per_sample_weights(per_sample_weights)
                                     .include_last_offset(options.include_last_offset()));
  last_missing_mask_ = fetched.MissingMask(input);
  last_missing_rows_ = fetched.missing_rows;
  return pooled;
}

torch::Tensor PrivateEmbeddingBagImpl::Embed(const PrivateRows& fetched,
                                             const torch::Tensor& input) const {
  return torch::embedding(fetched.weight, fetched.Local(input));
}

torch::Tensor PrivateEmbeddingBagImpl::forward(const torch::Tensor& input,
                                               const torch::Tensor& offsets,
                                               const torch::Tensor& per_sample_weights) {
  auto flat = input.to(torch::kInt64).contiguous().reshape(-1);
  auto fetched =
      Fetch(absl::MakeConstSpan(flat.data_ptr<int64_t>(), static_cast<size_t>(flat.numel())));
  TORCH_CHECK(fetched.ok(), fetched.status().ToString());
  return Pool(*fetched, input, offsets, per_sample_weights);
}

}  // namespace veil::client

namespace veil::client {
namespace {

// The bags of an EmbeddingBag call: where each starts in the flattened input, and where the last
// ends. Throws c10::Error for shapes torch::nn::EmbeddingBag refuses.
std::vector<int64_t> BagBounds(const torch::Tensor& input, const torch::Tensor& offsets,
                               bool include_last_offset) {
  std::vector<int64_t> bounds;
  if (input.dim() == 2) {
    TORCH_CHECK(!offsets.defined(), "PrivatePooledEmbeddingBag: 2-D input takes no offsets");
    for (int64_t b = 0; b <= input.size(0); ++b) bounds.push_back(b * input.size(1));
    return bounds;
  }
  TORCH_CHECK(input.dim() == 1 && offsets.defined() && offsets.dim() == 1,
              "PrivatePooledEmbeddingBag: input is 2-D, or 1-D with 1-D offsets");
  auto o = offsets.to(torch::kInt64).contiguous();
  bounds.assign(o.data_ptr<int64_t>(), o.data_ptr<int64_t>() + o.numel());
  if (!include_last_offset) bounds.push_back(input.numel());
  TORCH_CHECK(bounds.size() >= 2 && bounds.front() == 0 && bounds.back() == input.numel(),
              "PrivatePooledEmbeddingBag: offsets must start at 0 (and, with include_last_offset, "
              "end at the input's length)");
  for (size_t b = 1; b < bounds.size(); ++b) {
    TORCH_CHECK(bounds[b - 1] <= bounds[b], "PrivatePooledEmbeddingBag: offsets must not decrease");
  }
  return bounds;
}

}  // namespace

PrivatePooledEmbeddingBagImpl::PrivatePooledEmbeddingBagImpl(
    const PrivatePooledEmbeddingBagOptions& options_, std::shared_ptr<BagClient> client)
    : options(options_), client_(std::move(client)) {
  TORCH_CHECK(client_, "PrivatePooledEmbeddingBag: needs a client");
  TORCH_CHECK(!c10::get_if<torch::enumtype::kMax>(&options.mode()),
              "PrivatePooledEmbeddingBag: the server pools by sum or mean, not max");
  TORCH_CHECK(options.weight_frac_bits() >= 0 && options.weight_frac_bits() <= 30,
              "PrivatePooledEmbeddingBag: weight_frac_bits must be in [0, 30]");
  const BagTableInfo& t = client_->table();
  TORCH_CHECK(t.rows == static_cast<uint64_t>(options.num_embeddings()) &&
                  t.dim == static_cast<uint64_t>(options.embedding_dim()),
              "PrivatePooledEmbeddingBag: ", options.num_embeddings(), " x ",
              options.embedding_dim(), " embeddings, the server's table is ", t.rows, " x ", t.dim);
}

void PrivatePooledEmbeddingBagImpl::pretty_print(std::ostream& stream) const {
  stream << "veil::client::PrivatePooledEmbeddingBag(num_embeddings=" << options.num_embeddings()
         << ", embedding_dim=" << options.embedding_dim()
         << ", mode=" << torch::enumtype::get_enum_name(options.mode()) << ", protocol=bfv-bag)";
}

torch::Tensor PrivatePooledEmbeddingBagImpl::forward(const torch::Tensor& input,
                                                     const torch::Tensor& offsets,
                                                     const torch::Tensor& per_sample_weights) {
  absl::StatusOr<torch::Tensor> out = TryForward(input, offsets, per_sample_weights);
  TORCH_CHECK(out.ok(), "PrivatePooledEmbeddingBag: ", out.status().ToString());
  return *std::move(out);
}

absl::StatusOr<torch::Tensor> PrivatePooledEmbeddingBagImpl::TryForward(
    const torch::Tensor& input, const torch::Tensor& offsets,
    const torch::Tensor& per_sample_weights) {
  const bool mean = c10::get_if<torch::enumtype::kMean>(&options.mode()) != nullptr;
  const bool weighted = per_sample_weights.defined();
  TORCH_CHECK(!weighted || !mean, "PrivatePooledEmbeddingBag: per_sample_weights need mode sum");
  TORCH_CHECK(!weighted || per_sample_weights.sizes() == input.sizes(),
              "PrivatePooledEmbeddingBag: per_sample_weights must have the input's shape");
  const std::vector<int64_t> bounds = BagBounds(input, offsets, options.include_last_offset());
  auto rows = input.to(torch::kInt64).contiguous().reshape(-1);
  torch::Tensor w;
  if (weighted) w = per_sample_weights.to(torch::kFloat64).contiguous().reshape(-1);
  const int scale_bits = weighted ? options.weight_frac_bits() : 0;
  std::vector<uint64_t> indices;
  std::vector<uint32_t> bag_sizes;
  std::vector<int64_t> weights;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    if (bounds[b] == bounds[b + 1]) {
      // An empty bag pools to zeros; it is sent as row 0 with weight 0 so that the server cannot
      // tell it from the others.
      indices.push_back(0);
      weights.push_back(0);
      bag_sizes.push_back(1);
      continue;
    }
    for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
      const int64_t row = rows.data_ptr<int64_t>()[i];
      TORCH_CHECK(row >= 0 && row < options.num_embeddings(), "PrivatePooledEmbeddingBag: row ",
                  row, " outside [0, ", options.num_embeddings(), ")");
      indices.push_back(static_cast<uint64_t>(row));
      const double scaled = weighted ? std::ldexp(w.data_ptr<double>()[i], scale_bits) : 1.0;
      TORCH_CHECK(std::isfinite(scaled) && std::fabs(scaled) < 0x1p62,
                  "PrivatePooledEmbeddingBag: per-sample weight out of range");
      weights.push_back(std::llround(scaled));
    }
    bag_sizes.push_back(static_cast<uint32_t>(bounds[b + 1] - bounds[b]));
  }
  auto sums = client_->LookupPooledSums(indices, bag_sizes, weights);
  if (!sums.ok()) return sums.status();
  last_call_ = client_->last_call();
  const int64_t dim = options.embedding_dim();
  const int64_t bags = static_cast<int64_t>(bag_sizes.size());
  torch::Tensor out = torch::empty({bags, dim}, torch::kFloat32);
  float* values = out.data_ptr<float>();
  const int frac_bits = client_->table().frac_bits + scale_bits;
  for (int64_t b = 0; b < bags; ++b) {
    // The scaling is exact in double; the division of a mean rounds once.
    const double divisor = mean ? std::max<int64_t>(1, bounds[b + 1] - bounds[b]) : 1;
    for (int64_t j = 0; j < dim; ++j) {
      const double sum = std::ldexp(static_cast<double>((*sums)[b * dim + j]), -frac_bits);
      values[b * dim + j] = static_cast<float>(sum / divisor);
    }
  }
  return out;
}

}  // namespace veil::client
