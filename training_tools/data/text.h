// Text corpora for the language-model workload: the Brown corpus (word/tag files) and any plain
// text, tokenised into lowercase sentences per document; the vocabulary (embedding rows) and the
// fixed-length token windows an inference looks up; a deterministic split by document.
#ifndef VEIL_TRAINING_TOOLS_DATA_TEXT_H_
#define VEIL_TRAINING_TOOLS_DATA_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace veil::training {

struct Document {
  std::string id;                                   // file name (Brown: "ca01")
  std::vector<std::vector<std::string>> sentences;  // lowercase tokens
};

// Reads the Brown corpus files c[a-r]NN of `dir` in name order: one sentence per non-blank line,
// tokens "word/tag" with the tag (after the last '/') stripped and the word lowercased.
// Returns NOT_FOUND if `dir` has no such file (run scripts/fetch-data), INVALID_ARGUMENT with
// file and line for a token without a tag.
absl::StatusOr<std::vector<Document>> ReadBrownCorpus(const std::string& dir);

// Splits plain text into lowercase tokens: runs of letters, digits, apostrophes and hyphens
// are words; each other non-space character is a token of its own (punctuation).
std::vector<std::string> TokenizePlainText(absl::string_view text);

// How a plain-text corpus is cut into documents (a document is one client: the split puts every
// 5th document in validation, and the bootstrap resamples whole documents).
enum class TextSplitRule {
  kAuto,        // kFiles for a directory of at least 5 files, else the first of kChapters,
                // kParagraphs, kWindows that gives at least 5 documents
  kFiles,       // one document per file
  kChapters,    // a new document at each chapter heading line ("Chapter 12", "CHAPTER XII.",
                // "Book Two", a roman numeral alone on its line)
  kParagraphs,  // blank-line separated paragraphs
  kWindows,     // consecutive lines, whatever the paragraphs
};
struct TextSplit {
  TextSplitRule rule = TextSplitRule::kAuto;
  // Chapters, paragraphs and windows are merged with the ones that follow them into documents of
  // at least this many tokens (a shorter tail joins the file's last document).
  int document_words = 2000;
};
// "auto", "files", "chapters", "paragraphs", "windows". Returns INVALID_ARGUMENT for another name.
absl::StatusOr<TextSplitRule> ParseTextSplitRule(absl::string_view name);

struct TextCorpus {
  std::vector<Document> documents;
  std::string split;        // the rule applied: "files", "chapters", "paragraphs", "windows"
  std::string description;  // the rule in words, with the counts, for the user
};

// Returns INVALID_ARGUMENT naming `source` unless `bytes` are UTF-8 text: a byte sequence that is
// not UTF-8 (with its offset), or more than 1% control characters other than tab, line and page
// breaks (binary data).
absl::Status CheckText(absl::string_view bytes, const std::string& source);

// Reads a plain-text corpus: `path` is one file or a directory whose regular files (not starting
// with '.', in name order) are read in turn; each non-blank line is a sentence; documents follow
// `split` within each file (never across files). Returns NOT_FOUND if `path` does not exist,
// CheckText's errors, INVALID_ARGUMENT if it holds no token or document_words is not positive.
absl::StatusOr<TextCorpus> ReadTextCorpus(const std::string& path, const TextSplit& split);

// Every `validation_every`-th document (indices k·n − 1) goes to validation, the rest to
// training: documents of every Brown genre land on both sides.
struct DocumentSplit {
  std::vector<Document> train;
  std::vector<Document> validation;
};
DocumentSplit SplitByDocument(std::vector<Document> documents, int validation_every);

// Row 0 is the unknown word, row 1 the end of sentence; then the `max_size` − 2 most frequent
// training words (ties by spelling).
class Vocabulary {
 public:
  static constexpr int32_t kUnknown = 0;
  static constexpr int32_t kEndOfSentence = 1;
  static Vocabulary Build(const std::vector<Document>& documents, int32_t max_size);

  int32_t size() const { return static_cast<int32_t>(words_.size()); }
  int32_t RowOf(const std::string& word) const;

 private:
  std::vector<std::string> words_;
  absl::flat_hash_map<std::string, int32_t> rows_;
};

// The documents as one token-row stream per document (sentences ended by kEndOfSentence).
std::vector<std::vector<int32_t>> EncodeDocuments(const std::vector<Document>& documents,
                                                  const Vocabulary& vocabulary);

// Cuts each document stream into windows of `length` + 1 rows, one every `length` tokens: the
// `length` inputs and their next-token targets (a window's last target is the next window's first
// input; a shorter tail is dropped). One window = one inference.
std::vector<std::vector<int32_t>> TokenWindows(const std::vector<std::vector<int32_t>>& streams,
                                               int length);

// The distinct rows the inference of `window` looks up: its inputs (all but the last token).
std::vector<int32_t> WantedRows(const std::vector<int32_t>& window);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_DATA_TEXT_H_
