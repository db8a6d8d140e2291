#include "training_tools/data/r_serialize.h"

#include <zlib.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::training {
namespace {

// Type codes that only appear inside the stream (serialize.c).
constexpr int kRefSxp = 255;
constexpr int kNilValueSxp = 254;
constexpr int kGlobalEnvSxp = 253;
constexpr int kEmptyEnvSxp = 242;
constexpr int kBaseEnvSxp = 241;
constexpr int kAltrepSxp = 238;

// Nesting bound: data frames are 3 levels deep; a hostile stream must not overflow the stack.
constexpr int kMaxDepth = 64;

class XdrReader {
 public:
  explicit XdrReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  absl::StatusOr<RObject> ReadStream() {
    if (bytes_.size() < 2 || bytes_[0] != 'X' || bytes_[1] != '\n') {
      return absl::InvalidArgumentError("R stream: not an XDR serialization (no \"X\\n\" header)");
    }
    pos_ = 2;
    auto version = ReadInt();
    if (!version.ok()) return version.status();
    if (*version != 2 && *version != 3) {
      return absl::UnimplementedError(absl::StrCat("R stream: format version ", *version));
    }
    for (int i = 0; i < 2; ++i) {  // writer's and minimal reader's R versions
      if (auto v = ReadInt(); !v.ok()) return v.status();
    }
    if (*version == 3) {
      auto encoding_length = ReadInt();
      if (!encoding_length.ok()) return encoding_length.status();
      if (auto s = ReadBytes(*encoding_length); !s.ok()) return s.status();
    }
    return ReadItem(0);
  }

 private:
  absl::StatusOr<int32_t> ReadInt() {
    if (bytes_.size() - pos_ < 4) return Truncated();
    uint32_t v = (uint32_t{bytes_[pos_]} << 24) | (uint32_t{bytes_[pos_ + 1]} << 16) |
                 (uint32_t{bytes_[pos_ + 2]} << 8) | uint32_t{bytes_[pos_ + 3]};
    pos_ += 4;
    return static_cast<int32_t>(v);
  }

  absl::StatusOr<double> ReadDouble() {
    auto hi = ReadInt();
    if (!hi.ok()) return hi.status();
    auto lo = ReadInt();
    if (!lo.ok()) return lo.status();
    uint64_t bits = (uint64_t{static_cast<uint32_t>(*hi)} << 32) | static_cast<uint32_t>(*lo);
    return std::bit_cast<double>(bits);
  }

  absl::StatusOr<std::string> ReadBytes(int32_t n) {
    if (n < 0 || bytes_.size() - pos_ < static_cast<size_t>(n)) return Truncated();
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  // Vector lengths: -1 announces a 64-bit length in two ints. Every element takes at least
  // `min_element_bytes`, so a length beyond the remaining input is rejected before allocating.
  absl::StatusOr<size_t> ReadLength(size_t min_element_bytes) {
    auto n = ReadInt();
    if (!n.ok()) return n.status();
    uint64_t length;
    if (*n == -1) {
      auto hi = ReadInt();
      if (!hi.ok()) return hi.status();
      auto lo = ReadInt();
      if (!lo.ok()) return lo.status();
      length = (uint64_t{static_cast<uint32_t>(*hi)} << 32) | static_cast<uint32_t>(*lo);
    } else if (*n < 0) {
      return absl::InvalidArgumentError(absl::StrCat("R stream: negative length ", *n));
    } else {
      length = static_cast<uint64_t>(*n);
    }
    if (length > (bytes_.size() - pos_) / min_element_bytes) return Truncated();
    return static_cast<size_t>(length);
  }

  absl::Status Truncated() const {
    return absl::InvalidArgumentError(absl::StrCat("R stream: truncated at byte ", pos_));
  }

  // Reads a CHARSXP body (after its flags): nullopt for NA_STRING.
  absl::StatusOr<std::optional<std::string>> ReadCharBody() {
    auto n = ReadInt();
    if (!n.ok()) return n.status();
    if (*n == -1) return std::optional<std::string>();
    auto s = ReadBytes(*n);
    if (!s.ok()) return s.status();
    return std::optional<std::string>(std::move(*s));
  }

  absl::Status ReadAttributes(int depth, RObject& object) {
    auto attributes = ReadItem(depth + 1);
    if (!attributes.ok()) return attributes.status();
    if (attributes->type != RType::kPairList) {
      return absl::InvalidArgumentError("R stream: attributes are not a pairlist");
    }
    for (size_t i = 0; i < attributes->elements.size(); ++i) {
      object.attributes.emplace_back(attributes->tags[i], std::move(attributes->elements[i]));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<RObject> ReadItem(int depth) {
    if (depth > kMaxDepth) {
      return absl::InvalidArgumentError("R stream: nesting deeper than 64 levels");
    }
    auto flags = ReadInt();
    if (!flags.ok()) return flags.status();
    const int type = *flags & 0xFF;
    const bool has_attributes = (*flags & (1 << 9)) != 0;
    RObject object;
    switch (type) {
      case kNilValueSxp:
      case kGlobalEnvSxp:
      case kEmptyEnvSxp:
      case kBaseEnvSxp:
        return object;  // environments are irrelevant for data and read as NULL
      case kRefSxp: {
        int32_t index = static_cast<uint32_t>(*flags) >> 8;
        if (index == 0) {
          auto packed = ReadInt();
          if (!packed.ok()) return packed.status();
          index = *packed;
        }
        if (index < 1 || static_cast<size_t>(index) > references_.size()) {
          return absl::InvalidArgumentError(absl::StrCat("R stream: bad reference ", index));
        }
        return references_[index - 1];
      }
      case static_cast<int>(RType::kSymbol): {
        auto name = ReadItem(depth + 1);
        if (!name.ok()) return name.status();
        if (name->type != RType::kChar) {
          return absl::InvalidArgumentError("R stream: symbol name is not a CHARSXP");
        }
        object.type = RType::kSymbol;
        object.name = std::move(name->name);
        references_.push_back(object);
        return object;
      }
      case static_cast<int>(RType::kPairList): {
        // Pairlists are chains of (attributes?, tag?, car, cdr); walk the cdr iteratively.
        object.type = RType::kPairList;
        int32_t node_flags = *flags;
        while (true) {
          if (node_flags & (1 << 9)) {
            if (auto s = ReadAttributes(depth, object); !s.ok()) return s;
          }
          std::string tag;
          if (node_flags & (1 << 10)) {
            auto tag_object = ReadItem(depth + 1);
            if (!tag_object.ok()) return tag_object.status();
            tag = tag_object->name;
          }
          auto car = ReadItem(depth + 1);
          if (!car.ok()) return car.status();
          object.elements.push_back(std::move(*car));
          object.tags.push_back(std::move(tag));
          auto next = ReadInt();
          if (!next.ok()) return next.status();
          if ((*next & 0xFF) == kNilValueSxp) return object;
          if ((*next & 0xFF) != static_cast<int>(RType::kPairList)) {
            return absl::UnimplementedError("R stream: pairlist with a non-pairlist tail");
          }
          node_flags = *next;
        }
      }
      case static_cast<int>(RType::kChar): {
        auto body = ReadCharBody();
        if (!body.ok()) return body.status();
        object.type = RType::kChar;
        object.name = body->value_or("NA");
        return object;
      }
      case static_cast<int>(RType::kLogical):
      case static_cast<int>(RType::kInteger): {
        object.type = static_cast<RType>(type);
        auto n = ReadLength(4);
        if (!n.ok()) return n.status();
        object.ints.resize(*n);
        for (auto& v : object.ints) v = *ReadInt();  // length checked above
        break;
      }
      case static_cast<int>(RType::kReal): {
        object.type = RType::kReal;
        auto n = ReadLength(8);
        if (!n.ok()) return n.status();
        object.reals.resize(*n);
        for (auto& v : object.reals) v = *ReadDouble();
        break;
      }
      case static_cast<int>(RType::kString): {
        object.type = RType::kString;
        auto n = ReadLength(8);
        if (!n.ok()) return n.status();
        object.strings.reserve(*n);
        for (size_t i = 0; i < *n; ++i) {
          auto char_flags = ReadInt();
          if (!char_flags.ok()) return char_flags.status();
          if ((*char_flags & 0xFF) != static_cast<int>(RType::kChar)) {
            return absl::InvalidArgumentError("R stream: string vector element is not a CHARSXP");
          }
          auto body = ReadCharBody();
          if (!body.ok()) return body.status();
          object.strings.push_back(std::move(*body));
        }
        break;
      }
      case static_cast<int>(RType::kList): {
        object.type = RType::kList;
        auto n = ReadLength(4);
        if (!n.ok()) return n.status();
        object.elements.reserve(*n);
        for (size_t i = 0; i < *n; ++i) {
          auto element = ReadItem(depth + 1);
          if (!element.ok()) return element.status();
          object.elements.push_back(std::move(*element));
        }
        break;
      }
      case kAltrepSxp:
        return ReadAltrep(depth);
      default:
        return absl::UnimplementedError(
            absl::StrCat("R stream: SEXP type ", type, " is not supported by this reader"));
    }
    if (has_attributes) {
      if (auto s = ReadAttributes(depth, object); !s.ok()) return s;
    }
    return object;
  }

  // ALTREP objects are written as (info = pairlist(class, package, type), state, attributes).
  // R writes compact sequences (1:n) and "wrapped" vectors this way; both expand to plain vectors.
  absl::StatusOr<RObject> ReadAltrep(int depth) {
    auto info = ReadItem(depth + 1);
    if (!info.ok()) return info.status();
    auto state = ReadItem(depth + 1);
    if (!state.ok()) return state.status();
    auto attributes = ReadItem(depth + 1);
    if (!attributes.ok()) return attributes.status();
    if (info->type != RType::kPairList || info->elements.empty()) {
      return absl::InvalidArgumentError("R stream: ALTREP info is not a pairlist");
    }
    const std::string& kind = info->elements[0].name;
    RObject object;
    if (kind == "compact_intseq" || kind == "compact_realseq") {
      if (state->type != RType::kReal || state->reals.size() != 3) {
        return absl::InvalidArgumentError("R stream: bad compact sequence state");
      }
      const double n = state->reals[0], start = state->reals[1], step = state->reals[2];
      if (!(n >= 0 && n <= 1e9)) {
        return absl::InvalidArgumentError("R stream: compact sequence length out of range");
      }
      const bool integer = kind == "compact_intseq";
      object.type = integer ? RType::kInteger : RType::kReal;
      for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
        const double v = start + step * static_cast<double>(i);
        if (integer) {
          object.ints.push_back(static_cast<int32_t>(v));
        } else {
          object.reals.push_back(v);
        }
      }
    } else if (kind.starts_with("wrap_")) {
      // state = list(wrapped vector, metadata)
      if (state->type != RType::kList || state->elements.empty()) {
        return absl::InvalidArgumentError("R stream: bad wrapped vector state");
      }
      object = std::move(state->elements[0]);
    } else {
      return absl::UnimplementedError(absl::StrCat("R stream: ALTREP class ", kind));
    }
    if (attributes->type == RType::kPairList) {
      object.attributes.clear();
      for (size_t i = 0; i < attributes->elements.size(); ++i) {
        object.attributes.emplace_back(attributes->tags[i], std::move(attributes->elements[i]));
      }
    }
    return object;
  }

  absl::Span<const uint8_t> bytes_;
  size_t pos_ = 0;
  std::vector<RObject> references_;
};

}  // namespace

const RObject* RObject::Attribute(const std::string& key) const {
  for (const auto& [tag, value] : attributes) {
    if (tag == key) return &value;
  }
  return nullptr;
}

const RObject* RObject::Element(const std::string& key) const {
  const RObject* names = Attribute("names");
  if (names == nullptr || names->type != RType::kString) return nullptr;
  for (size_t i = 0; i < names->strings.size() && i < elements.size(); ++i) {
    if (names->strings[i] == key) return &elements[i];
  }
  return nullptr;
}

size_t RObject::Length() const {
  switch (type) {
    case RType::kLogical:
    case RType::kInteger:
      return ints.size();
    case RType::kReal:
      return reals.size();
    case RType::kString:
      return strings.size();
    case RType::kList:
    case RType::kPairList:
      return elements.size();
    default:
      return 0;
  }
}

absl::StatusOr<RObject> UnserializeR(absl::Span<const uint8_t> bytes) {
  return XdrReader(bytes).ReadStream();
}

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::vector<uint8_t>> Inflate(absl::Span<const uint8_t> compressed, bool gzip,
                                             size_t expected_size) {
  z_stream stream{};
  // 15 window bits; +16 selects the gzip wrapper instead of zlib's.
  if (inflateInit2(&stream, gzip ? 15 + 16 : 15) != Z_OK) {
    return absl::InternalError("zlib: inflateInit2 failed");
  }
  std::vector<uint8_t> out(expected_size > 0 ? expected_size : compressed.size() * 4 + 1024);
  stream.next_in = const_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (stream.total_out == out.size()) {
      if (expected_size > 0) break;  // more output than announced: reported below
      out.resize(out.size() * 2);
    }
    stream.next_out = out.data() + stream.total_out;
    stream.avail_out = static_cast<uInt>(out.size() - stream.total_out);
    rc = inflate(&stream, Z_NO_FLUSH);
  }
  const size_t produced = stream.total_out;
  inflateEnd(&stream);
  if (rc != Z_STREAM_END) {
    return absl::InvalidArgumentError(absl::StrCat("zlib: corrupt or truncated stream (code ", rc,
                                                   ", ", produced, " bytes inflated)"));
  }
  if (expected_size > 0 && produced != expected_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("zlib: inflated ", produced, " bytes, the header announced ", expected_size));
  }
  out.resize(produced);
  return out;
}

absl::StatusOr<RObject> ReadLazyLoadObject(const std::string& base, const std::string& name) {
  auto index_bytes = ReadFileBytes(base + ".rdx");
  if (!index_bytes.ok()) return index_bytes.status();
  auto index_stream = Inflate(*index_bytes, /*gzip=*/true, 0);
  if (!index_stream.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(base, ".rdx: ", index_stream.status().message()));
  }
  auto index = UnserializeR(*index_stream);
  if (!index.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(base, ".rdx: ", index.status().message()));
  }
  const RObject* variables = index->Element("variables");
  if (variables == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(base, ".rdx: no `variables` index"));
  }
  const RObject* entry = variables->Element(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat(base, ".rdx: no object called ", name));
  }
  if (entry->type != RType::kInteger || entry->ints.size() != 2 || entry->ints[0] < 0 ||
      entry->ints[1] < 4) {
    return absl::InvalidArgumentError(absl::StrCat(base, ".rdx: bad index entry for ", name));
  }
  auto db = ReadFileBytes(base + ".rdb");
  if (!db.ok()) return db.status();
  const size_t offset = entry->ints[0], length = entry->ints[1];
  if (offset + length > db->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(base, ".rdb: entry ", name, " lies beyond the end of the file"));
  }
  const uint8_t* p = db->data() + offset;
  const size_t inflated_size =
      (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
  auto object_stream =
      Inflate(absl::MakeConstSpan(p + 4, length - 4), /*gzip=*/false, inflated_size);
  if (!object_stream.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(base, ".rdb (", name, "): ", object_stream.status().message()));
  }
  auto object = UnserializeR(*object_stream);
  if (!object.ok()) {
    return absl::Status(object.status().code(),
                        absl::StrCat(base, ".rdb (", name, "): ", object.status().message()));
  }
  return object;
}

}  // namespace veil::training
