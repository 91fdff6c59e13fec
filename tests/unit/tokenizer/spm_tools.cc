// Helpers around the SentencePiece command-line tools; see spm_tools.h.
#include "tests/unit/tokenizer/spm_tools.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace splitspec::testing {
namespace {

absl::Status Run(const std::string& command) {
  const int rc = std::system(command.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("command failed (", rc, "): ", command));
  return absl::OkStatus();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // final newline
  return lines;
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> TrainModel(const std::string& dir, const std::string& name,
                                       const std::string& input, const std::string& options) {
  const std::string prefix = dir + "/" + name;
  if (absl::Status s = Run(absl::StrCat("spm_train --input=", input, " --model_prefix=", prefix,
                                        " --num_threads=2 ", options, " > ", prefix,
                                        ".train.log 2>&1"));
      !s.ok()) {
    return s;
  }
  return prefix + ".model";
}

absl::StatusOr<std::vector<std::vector<int32_t>>> SpmEncodeIds(
    const std::string& dir, const std::string& model, const std::vector<std::string>& lines,
    const std::string& extra_flags) {
  const std::string in = dir + "/encode_in.txt";
  const std::string out = dir + "/encode_out.txt";
  std::string text;
  for (const std::string& line : lines) absl::StrAppend(&text, line, "\n");
  if (absl::Status s = WriteFile(in, text); !s.ok()) return s;
  if (absl::Status s = Run(absl::StrCat("spm_encode --model=", model, " --output_format=id ",
                                        extra_flags, " < ", in, " > ", out));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> output = ReadFile(out);
  if (!output.ok()) return output.status();
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& line : SplitLines(*output)) {
    std::vector<int32_t>& row = ids.emplace_back();
    for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      int32_t id;
      if (!absl::SimpleAtoi(token, &id)) {
        return absl::InternalError(absl::StrCat("bad spm_encode output: ", line));
      }
      row.push_back(id);
    }
  }
  if (ids.size() != lines.size()) {
    return absl::InternalError(absl::StrCat("spm_encode printed ", ids.size(), " lines for ",
                                            lines.size()));
  }
  return ids;
}

absl::StatusOr<std::vector<std::string>> SpmDecodeIds(
    const std::string& dir, const std::string& model,
    const std::vector<std::vector<int32_t>>& id_lines) {
  const std::string in = dir + "/decode_in.txt";
  const std::string out = dir + "/decode_out.txt";
  std::string text;
  for (const auto& ids : id_lines) absl::StrAppend(&text, absl::StrJoin(ids, " "), "\n");
  if (absl::Status s = WriteFile(in, text); !s.ok()) return s;
  if (absl::Status s = Run(absl::StrCat("spm_decode --model=", model,
                                        " --input_format=id < ", in, " > ", out));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> output = ReadFile(out);
  if (!output.ok()) return output.status();
  std::vector<std::string> lines = SplitLines(*output);
  if (lines.size() != id_lines.size()) {
    return absl::InternalError(absl::StrCat("spm_decode printed ", lines.size(), " lines for ",
                                            id_lines.size()));
  }
  return lines;
}

std::string CorpusPath() { return SPLITSPEC_SOURCE_DIR "/data/text/tokenizer_corpus.txt"; }

absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return SplitLines(*text);
}

std::vector<std::string> LicenseLines() {
  std::vector<std::string> lines;
  for (const char* name : {"Apache-2.0", "GPL-3", "LGPL-2.1", "MPL-2.0", "Artistic", "BSD"}) {
    absl::StatusOr<std::vector<std::string>> file =
        ReadLines(std::string("/usr/share/common-licenses/") + name);
    if (!file.ok()) {
      ADD_FAILURE() << file.status();
      continue;
    }
    for (std::string& line : *file) {
      // spm_encode reads lines; a stray carriage return would be kept by both sides anyway,
      // but keep the comparison about text rather than line endings.
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

std::vector<std::string> TrickyLines() {
  std::vector<std::string> lines = {
      "",
      " ",
      "     ",
      "\t",
      "hello",
      " hello",
      "hello ",
      "  leading and trailing  ",
      "multiple    spaces   between     words",
      "tabs\tbetween\t\twords\t",
      "mixed \t whitespace\t \tend",
      "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x85ngstr\xC3\xB6m Stra\xC3\x9F" "e",
      "combining e\xCC\x81 and a\xCC\x8A and o\xCC\x88",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87\xE7\xAB\xA0\xE3\x81\xA7\xE3\x81"
      "\x99\xE3\x80\x82",
      "\xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xD0\xA0\xD1\x83\xD1\x81\xD1"
      "\x81\xD0\xBA\xD0\xB8\xD0\xB9 \xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE"
      "\xAC \xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9 \xD7\xA2\xD7\x91\xD7\xA8"
      "\xD7\x99\xD7\xAA",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x9A\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 flag "
      "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
      "fullwidth \xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93 and "
      "ligature \xEF\xAC\x81 and \xE2\x91\xA0 \xE2\x85\xAB \xC2\xBD",
      "no\xC2\xA0" "break\xE3\x80\x80ideographic\xE2\x80\x83" "em\xE2\x80\x8Bzero-width",
      "literal markers <s> </s> <unk> <0x41> <pad> \xE2\x96\x81 \xE2\x96\x81\xE2\x96\x81x",
      "invalid utf8 \xFF\xFE then \xE4\xB8 cut and \xC0\xAF overlong \xED\xA0\x80 surrogate",
      "lone continuation \x80\x81 bytes and \xF4\x90\x80\x80 past max",
      "replacement char \xEF\xBF\xBD itself",
      "digits 0123456789 3.14159 1e-9 -42 0xDEADBEEF 1,234,567.89",
      "punctuation !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
      "control \x01\x02\x1B[0m chars \x7F",
      "    indented code: for (int i = 0; i < n; ++i) { sum += a[i]; }",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
      "\xE2\x80\x9C" "curly quotes\xE2\x80\x9D \xE2\x80\x98single\xE2\x80\x99 \xE2\x80\x94 em dash "
      "\xE2\x80\xA6 ellipsis \xC2\xAB guillemets \xC2\xBB",
  };
  // One long line (longer than spm_train's sentence limit) of mixed content.
  std::string long_line;
  for (int i = 0; i < 400; ++i) {
    absl::StrAppend(&long_line, "word", i, " ", i % 7 == 0 ? "\xE6\x97\xA5 " : "",
                    i % 11 == 0 ? "  \t" : "");
  }
  lines.push_back(long_line);
  return lines;
}

}  // namespace splitspec::testing
