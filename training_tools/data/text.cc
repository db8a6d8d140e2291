#include "training_tools/data/text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace veil::training {
namespace {

namespace fs = std::filesystem;

bool IsWordChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '\'' || c == '-';
}

// Regular files of `dir` whose names match `pattern`, in name order.
std::vector<fs::path> FilesIn(const fs::path& dir, const std::regex& pattern) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), pattern)) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

absl::StatusOr<std::vector<Document>> ReadBrownCorpus(const std::string& dir) {
  const std::vector<fs::path> files = FilesIn(dir, std::regex("c[a-r][0-9][0-9]"));
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no Brown corpus files c[a-r]NN (run scripts/fetch-data)"));
  }
  std::vector<Document> documents;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", file.string()));
    Document document{file.filename().string(), {}};
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      std::vector<std::string> sentence;
      for (absl::string_view token :
           absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
        const size_t slash = token.rfind('/');
        if (slash == absl::string_view::npos || slash == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(file.string(), ":", line_number, ": token \"", token, "\" has no tag"));
        }
        sentence.push_back(absl::AsciiStrToLower(token.substr(0, slash)));
      }
      if (!sentence.empty()) document.sentences.push_back(std::move(sentence));
    }
    documents.push_back(std::move(document));
  }
  return documents;
}

std::vector<std::string> TokenizePlainText(absl::string_view text) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (IsWordChar(c)) {
      size_t j = i;
      while (j < text.size() && IsWordChar(text[j])) ++j;
      tokens.push_back(absl::AsciiStrToLower(text.substr(i, j - i)));
      i = j;
    } else {
      tokens.emplace_back(1, c);
      ++i;
    }
  }
  return tokens;
}

absl::StatusOr<std::vector<Document>> ReadTextCorpus(const std::string& path) {
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    files = FilesIn(path, std::regex("[^.].*"));
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    return absl::NotFoundError(absl::StrCat("no text corpus at ", path));
  }
  std::vector<Document> documents;
  size_t tokens = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", file.string()));
    Document document{file.filename().string(), {}};
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> sentence = TokenizePlainText(line);
      tokens += sentence.size();
      if (!sentence.empty()) document.sentences.push_back(std::move(sentence));
    }
    documents.push_back(std::move(document));
  }
  if (tokens == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no text"));
  return documents;
}

DocumentSplit SplitByDocument(std::vector<Document> documents, int validation_every) {
  DocumentSplit split;
  for (size_t i = 0; i < documents.size(); ++i) {
    auto& side = (i + 1) % validation_every == 0 ? split.validation : split.train;
    side.push_back(std::move(documents[i]));
  }
  return split;
}

Vocabulary Vocabulary::Build(const std::vector<Document>& documents, int32_t max_size) {
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const Document& d : documents) {
    for (const auto& sentence : d.sentences) {
      for (const std::string& word : sentence) ++counts[word];
    }
  }
  std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Vocabulary vocabulary;
  vocabulary.words_ = {"<unk>", "<eos>"};
  for (const auto& [word, count] : ranked) {
    if (vocabulary.size() >= max_size) break;
    vocabulary.words_.push_back(word);
  }
  for (int32_t row = 0; row < vocabulary.size(); ++row) {
    vocabulary.rows_[vocabulary.words_[row]] = row;
  }
  return vocabulary;
}

int32_t Vocabulary::RowOf(const std::string& word) const {
  auto it = rows_.find(word);
  return it == rows_.end() ? kUnknown : it->second;
}

std::vector<std::vector<int32_t>> EncodeDocuments(const std::vector<Document>& documents,
                                                  const Vocabulary& vocabulary) {
  std::vector<std::vector<int32_t>> streams;
  for (const Document& d : documents) {
    std::vector<int32_t> stream;
    for (const auto& sentence : d.sentences) {
      for (const std::string& word : sentence) stream.push_back(vocabulary.RowOf(word));
      stream.push_back(Vocabulary::kEndOfSentence);
    }
    streams.push_back(std::move(stream));
  }
  return streams;
}

std::vector<std::vector<int32_t>> TokenWindows(const std::vector<std::vector<int32_t>>& streams,
                                               int length) {
  std::vector<std::vector<int32_t>> windows;
  for (const auto& stream : streams) {
    for (size_t start = 0; start + length + 1 <= stream.size(); start += length) {
      windows.emplace_back(stream.begin() + start, stream.begin() + start + length + 1);
    }
  }
  return windows;
}

std::vector<int32_t> WantedRows(const std::vector<int32_t>& window) {
  std::vector<int32_t> rows(window.begin(), window.end() - (window.empty() ? 0 : 1));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace veil::training
