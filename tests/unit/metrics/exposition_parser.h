// Test helper: a small parser of the Prometheus text exposition format, written from the format
// description (not from prometheus-cpp), so tests check what a scraper would read.
#ifndef SPLITSPEC_TESTS_UNIT_METRICS_EXPOSITION_PARSER_H_
#define SPLITSPEC_TESTS_UNIT_METRICS_EXPOSITION_PARSER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::metrics::testing {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in exposition order, unescaped
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;               // in exposition order
  std::map<std::string, std::string> types;  // family name -> TYPE
  std::map<std::string, std::string> helps;  // family name -> HELP (unescaped)

  // The value of the one sample named `name` whose labels include all of `labels`; nullopt when
  // there is none or more than one.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const;
  // Samples named `name` whose labels include `labels`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& labels = {}) const;
};

absl::StatusOr<Exposition> ParseExposition(const std::string& text);

}  // namespace splitspec::metrics::testing

#endif  // SPLITSPEC_TESTS_UNIT_METRICS_EXPOSITION_PARSER_H_
