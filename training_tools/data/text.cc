#include "training_tools/data/text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

constexpr size_t kMinDocuments = 5;

constexpr std::pair<TextSplitRule, const char*> kSplitNames[] = {
    {TextSplitRule::kAuto, "auto"},
    {TextSplitRule::kFiles, "files"},
    {TextSplitRule::kChapters, "chapters"},
    {TextSplitRule::kParagraphs, "paragraphs"},
    {TextSplitRule::kWindows, "windows"}};

// Bytes of the UTF-8 sequence at the start of `s` (1–4), 0 if it is not valid UTF-8 (overlong
// forms, surrogates and code points above U+10FFFF included).
int Utf8Length(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  int length;
  uint32_t min, code;
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, min = 0x80, code = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, min = 0x800, code = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, min = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() < static_cast<size_t>(length)) return 0;
  for (int i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = code << 6 | (byte(i) & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

// A line of a plain-text file: its tokens (none for a blank line) and whether it is a chapter
// heading.
struct TextLine {
  std::vector<std::string> tokens;
  bool heading = false;
};
struct TextFile {
  std::string name;
  std::vector<TextLine> lines;
};

bool IsRomanNumeral(absl::string_view word) {
  return !word.empty() && word.size() <= 8 &&
         word.find_first_not_of("IVXLCDM") == absl::string_view::npos;
}

// "Chapter 12", "CHAPTER XII.", "Book Two", "Part the First", or a roman numeral alone ("XII.").
bool IsChapterHeading(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty() || line.size() > 60) return false;
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.size() == 1) return IsRomanNumeral(absl::StripSuffix(words[0], "."));
  const std::string first = absl::AsciiStrToLower(words[0]);
  return first == "chapter" || first == "book" || first == "part" || first == "volume";
}

absl::StatusOr<TextFile> ReadTextFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (auto text = CheckText(bytes, path.string()); !text.ok()) return text;
  TextFile file{path.filename().string(), {}};
  for (absl::string_view line : absl::StrSplit(bytes, '\n')) {
    file.lines.push_back({TokenizePlainText(line), IsChapterHeading(line)});
  }
  return file;
}

// Cuts each file into segments by `rule` and merges consecutive segments into documents of at
// least `words` tokens (kFiles: one document per file).
std::vector<Document> SplitFiles(const std::vector<TextFile>& files, TextSplitRule rule,
                                 int words) {
  std::vector<Document> documents;
  for (const TextFile& file : files) {
    const size_t first = documents.size();
    Document current{absl::StrCat(file.name, "#1"), {}};
    size_t current_tokens = 0;
    auto close = [&] {
      if (current.sentences.empty()) return;
      documents.push_back(std::move(current));
      current = {absl::StrCat(file.name, "#", documents.size() - first + 1), {}};
      current_tokens = 0;
    };
    for (const TextLine& line : file.lines) {
      // A segment ends before a heading (chapters), at a blank line (paragraphs), after every
      // line (windows); the document closes there once it is long enough.
      const bool boundary = (rule == TextSplitRule::kChapters && line.heading) ||
                            (rule == TextSplitRule::kParagraphs && line.tokens.empty()) ||
                            rule == TextSplitRule::kWindows;
      if (boundary && rule != TextSplitRule::kWindows &&
          current_tokens >= static_cast<size_t>(words)) {
        close();
      }
      if (!line.tokens.empty()) {
        current.sentences.push_back(line.tokens);
        current_tokens += line.tokens.size();
      }
      if (rule == TextSplitRule::kWindows && current_tokens >= static_cast<size_t>(words)) close();
    }
    if (rule != TextSplitRule::kFiles && current_tokens < static_cast<size_t>(words) &&
        documents.size() > first) {
      // A short tail joins the file's last document.
      auto& last = documents.back().sentences;
      last.insert(last.end(), current.sentences.begin(), current.sentences.end());
      current.sentences.clear();
    }
    close();
  }
  return documents;
}

std::string RuleInWords(TextSplitRule rule, int words) {
  switch (rule) {
    case TextSplitRule::kFiles:
      return "one document per file";
    case TextSplitRule::kChapters:
      return absl::StrFormat(
          "split at chapter headings (\"Chapter 12\", \"CHAPTER XII.\", \"Book Two\", a roman "
          "numeral alone on its line), chapters merged up to at least %d tokens",
          words);
    case TextSplitRule::kParagraphs:
      return absl::StrFormat(
          "split at blank lines, consecutive paragraphs merged up to at least %d tokens", words);
    default:
      return absl::StrFormat("consecutive lines cut into documents of at least %d tokens", words);
  }
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

absl::StatusOr<TextSplitRule> ParseTextSplitRule(absl::string_view name) {
  for (const auto& [rule, rule_name] : kSplitNames) {
    if (name == rule_name) return rule;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown text split \"", name, "\" (auto, files, chapters, paragraphs or windows)"));
}

absl::Status CheckText(absl::string_view bytes, const std::string& source) {
  size_t characters = 0, control = 0;
  for (size_t i = 0; i < bytes.size();) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    const int length = Utf8Length(bytes.substr(i));
    if (length == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: not UTF-8 text (byte 0x%02x at offset %d); convert it (e.g. iconv -f latin1 -t "
          "utf-8) or leave it out",
          source, lead, i));
    }
    ++characters;
    if (length == 1 && (lead < 0x20 || lead == 0x7f) && lead != '\t' && lead != '\n' &&
        lead != '\r' && lead != '\f' && lead != '\v') {
      ++control;
    }
    i += length;
  }
  if (control * 100 > characters) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not text: %d of its %d characters are control characters (binary data?)", source,
        control, characters));
  }
  return absl::OkStatus();
}

absl::StatusOr<TextCorpus> ReadTextCorpus(const std::string& path, const TextSplit& split) {
  if (split.document_words <= 0) {
    return absl::InvalidArgumentError("text: document words must be positive");
  }
  std::error_code ec;
  std::vector<fs::path> paths;
  const bool directory = fs::is_directory(path, ec);
  if (directory) {
    paths = FilesIn(path, std::regex("[^.].*"));
  } else if (fs::is_regular_file(path, ec)) {
    paths.push_back(path);
  } else {
    return absl::NotFoundError(absl::StrCat("no text corpus at ", path));
  }
  std::vector<TextFile> files;
  size_t tokens = 0;
  for (const fs::path& file : paths) {
    auto read = ReadTextFile(file);
    if (!read.ok()) return read.status();
    for (const auto& line : read->lines) tokens += line.tokens.size();
    files.push_back(std::move(*read));
  }
  if (tokens == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no text"));

  TextSplitRule rule = split.rule;
  TextCorpus corpus;
  if (rule == TextSplitRule::kAuto) {
    rule = directory && files.size() >= kMinDocuments ? TextSplitRule::kFiles
                                                      : TextSplitRule::kWindows;
    for (TextSplitRule candidate : {TextSplitRule::kChapters, TextSplitRule::kParagraphs}) {
      if (rule == TextSplitRule::kFiles) break;
      if (SplitFiles(files, candidate, split.document_words).size() >= kMinDocuments) {
        rule = candidate;
        break;
      }
    }
  }
  corpus.documents = SplitFiles(files, rule, split.document_words);
  for (const auto& [r, name] : kSplitNames) {
    if (r == rule) corpus.split = name;
  }
  corpus.description = absl::StrFormat(
      "%d file%s, %d tokens, %s: %d documents%s", files.size(), files.size() == 1 ? "" : "s",
      tokens, RuleInWords(rule, split.document_words), corpus.documents.size(),
      split.rule == TextSplitRule::kAuto ? " (--text_split=auto)" : "");
  return corpus;
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
