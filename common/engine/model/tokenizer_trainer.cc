// TrainTokenizer: posix_spawnp("spm_train") with its output sent to a log file, then a check of
// the vocabulary it wrote (size and special-token ids), which the model config relies on.
//
// spm_train records its command line (the input's and the output prefix's paths among it) in
// the model it writes, so the same corpus trained into two directories gave two different
// tokenizer.model files. It runs inside the output directory, reading the corpus through a link
// there, so that every path it records is relative and the file depends on the corpus alone.
#include "common/engine/model/tokenizer_trainer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace splitspec::engine {
namespace {

std::string ReadTail(const std::string& path, size_t max_chars) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() <= max_chars ? all : all.substr(all.size() - max_chars);
}

constexpr char kCorpusLink[] = "tokenizer_corpus.txt";
constexpr char kModelPrefix[] = "tokenizer";
constexpr char kLogName[] = "spm_train.log";

// Runs `argv` in directory `dir` with stdout and stderr sent to `dir`/`log_name`; returns its
// exit status or -1.
absl::StatusOr<int> RunLoggedIn(const std::string& dir, const std::vector<std::string>& args,
                                const std::string& log_name) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_name.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run ", args[0], ": ",
                                                      std::strerror(error),
                                                      " (install Debian's sentencepiece package)"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// spm_train's .vocab lists one "piece<TAB>score" line per id.
absl::Status CheckVocab(const std::string& vocab_path, int vocab_size) {
  std::ifstream in(vocab_path);
  if (!in) return absl::InternalError(absl::StrCat("spm_train wrote no ", vocab_path));
  std::vector<std::string> pieces;
  for (std::string line; std::getline(in, line);) pieces.push_back(line.substr(0, line.find('\t')));
  if (static_cast<int>(pieces.size()) != vocab_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("spm_train produced ", pieces.size(), " pieces instead of ", vocab_size));
  }
  if (vocab_size < 3 || pieces[0] != "<unk>" || pieces[1] != "<s>" || pieces[2] != "</s>") {
    return absl::InternalError("spm_train did not put <unk>, <s>, </s> at ids 0, 1, 2");
  }
  return absl::OkStatus();
}

// Makes the corpus readable as `out_dir`/kCorpusLink (spm_train runs inside `out_dir`): a
// symbolic link to its absolute path, whose path is returned for removal afterwards; nothing when
// the corpus is that very file. A file of that name that is not the corpus is never replaced.
absl::StatusOr<std::optional<std::string>> LinkCorpusInto(const std::string& corpus, const std::string& out_dir) {
  char* absolute = ::realpath(corpus.c_str(), nullptr);
  if (absolute == nullptr) {
    return absl::NotFoundError(absl::StrCat("tokenizer corpus ", corpus, ": ", std::strerror(errno)));
  }
  const std::string target = absolute;
  std::free(absolute);
  const std::string link = absl::StrCat(out_dir, "/", kCorpusLink);
  struct stat st;
  if (::lstat(link.c_str(), &st) == 0) {
    char* existing = ::realpath(link.c_str(), nullptr);
    const bool is_corpus = existing != nullptr && target == existing;
    std::free(existing);
    if (is_corpus) return std::optional<std::string>();
    if (!S_ISLNK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(link, " exists and is not the corpus: the tokenizer trainer reads the corpus by that name"));
    }
    std::remove(link.c_str());  // a link to another corpus, left by an interrupted run
  }
  if (::symlink(target.c_str(), link.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot link ", link, " to the corpus: ", std::strerror(errno)));
  }
  return std::optional<std::string>(link);
}

}  // namespace

std::string DefaultTokenizerCorpus() {
  return std::string(SPLITSPEC_SOURCE_DIR) + "/data/text/tokenizer_corpus.txt";
}

absl::Status TrainTokenizer(const std::string& corpus, int vocab_size, const std::string& out_dir) {
  struct stat st;
  if (::stat(corpus.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat("tokenizer corpus ", corpus, " not found (use --corpus)"));
  }
  absl::StatusOr<std::optional<std::string>> link = LinkCorpusInto(corpus, out_dir);
  if (!link.ok()) return link.status();
  // Llama's trainer settings, so our tokenizer exercises the same code paths as real models.
  const std::vector<std::string> args = {
      "spm_train",
      absl::StrCat("--input=", kCorpusLink),
      absl::StrCat("--model_prefix=", kModelPrefix),
      absl::StrCat("--vocab_size=", vocab_size),
      "--model_type=bpe",
      "--byte_fallback=true",
      "--character_coverage=0.99995",
      "--normalization_rule_name=identity",
      "--remove_extra_whitespaces=false",
      "--add_dummy_prefix=true",
      "--split_digits=true",
      "--allow_whitespace_only_pieces=true",
      "--unk_id=0",
      "--bos_id=1",
      "--eos_id=2",
      "--pad_id=-1",
      "--num_threads=2",
  };
  absl::StatusOr<int> exit_code = RunLoggedIn(out_dir, args, kLogName);
  if (link->has_value()) std::remove((*link)->c_str());
  if (!exit_code.ok()) return exit_code.status();
  const std::string log_path = absl::StrCat(out_dir, "/", kLogName);
  if (*exit_code != 0) {
    const std::string tail = ReadTail(log_path, 600);
    std::remove(log_path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("spm_train failed (exit ", *exit_code, ") on ", corpus, ":\n", tail));
  }
  std::remove(log_path.c_str());
  const std::string vocab_path = absl::StrCat(out_dir, "/", kModelPrefix, ".vocab");
  absl::Status vocab = CheckVocab(vocab_path, vocab_size);
  std::remove(vocab_path.c_str());  // HF model directories carry only the .model
  return vocab;
}

}  // namespace splitspec::engine
