// The services' flag getters (common/rpc/flags.h): numbers an int cannot hold and NaN are
// errors, not silently different values, and the range getters name the flag, the range and
// the value.
#include "common/rpc/flags.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/rpc/serving_flags.h"
#include "gtest/gtest.h"

namespace splitspec::rpc {
namespace {

Flags ParseOrDie(std::vector<std::string> args) {
  args.insert(args.begin(), "binary");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  absl::StatusOr<Flags> flags = Flags::Parse(static_cast<int>(argv.size()), argv.data(), {});
  EXPECT_TRUE(flags.ok()) << flags.status();
  return *flags;
}

TEST(FlagsTest, AnIntegerAnIntCannotHoldIsAnError) {
  const Flags flags = ParseOrDie({"--port", "4294967297", "--low", "-2147483649", "--huge", "99999999999999999999",
                                  "--max", "2147483647", "--min", "-2147483648"});
  // 4294967297 = 2^32 + 1: a cast to int made it 1.
  EXPECT_EQ(flags.GetInt("port", 0).status().message(), "--port is out of range, got 4294967297");
  EXPECT_FALSE(flags.GetInt("low", 0).ok());
  EXPECT_FALSE(flags.GetInt("huge", 0).ok());
  EXPECT_EQ(*flags.GetInt("max", 0), INT_MAX);
  EXPECT_EQ(*flags.GetInt("min", 0), INT_MIN);
}

TEST(FlagsTest, TextAfterTheNumberIsAnError) {
  const Flags flags = ParseOrDie({"--port", "80x", "--seconds", "1.5s", "--empty="});
  EXPECT_EQ(flags.GetInt("port", 0).status().message(), "--port expects an integer, got '80x'");
  EXPECT_EQ(flags.GetDouble("seconds", 0).status().message(), "--seconds expects a number, got '1.5s'");
  EXPECT_FALSE(flags.GetInt("empty", 0).ok());
}

TEST(FlagsTest, NaNIsNotANumberAnyFlagTakes) {
  const Flags flags = ParseOrDie({"--a", "nan", "--b", "-NaN", "--c", "inf", "--d", "-1e400"});
  EXPECT_EQ(flags.GetDouble("a", 1).status().message(), "--a expects a number, got 'nan'");
  EXPECT_FALSE(flags.GetDouble("b", 1).ok());
  // Infinities are values ("never"), and strtod's overflow saturates to one.
  EXPECT_EQ(*flags.GetDouble("c", 1), HUGE_VAL);
  EXPECT_EQ(*flags.GetDouble("d", 1), -HUGE_VAL);
}

TEST(FlagsTest, IntInRangeNamesTheFlagTheRangeAndTheValue) {
  const Flags flags = ParseOrDie({"--port", "70000", "--threads", "-2", "--blocks", "0", "--ok", "7"});
  EXPECT_EQ(flags.GetIntInRange("port", 1, 0, 65535).status().message(), "--port must be in [0, 65535], got 70000");
  EXPECT_EQ(flags.GetIntInRange("threads", 0, 0, 4096).status().message(), "--threads must be in [0, 4096], got -2");
  // No upper bound: said as one.
  EXPECT_EQ(flags.GetIntInRange("blocks", 1, 1, INT_MAX).status().message(), "--blocks must be at least 1, got 0");
  EXPECT_EQ(*flags.GetIntInRange("ok", 0, 7, 7), 7);
  EXPECT_EQ(*flags.GetIntInRange("absent", 3, 0, 10), 3);
  // A value that is not a number keeps its own message.
  const Flags word = ParseOrDie({"--port", "http"});
  EXPECT_EQ(word.GetIntInRange("port", 1, 0, 65535).status().message(), "--port expects an integer, got 'http'");
}

TEST(FlagsTest, DoubleAtLeastNamesTheFlagAndTheValue) {
  const Flags flags = ParseOrDie({"--drain-seconds", "-0.5", "--zero", "0", "--nan", "nan"});
  EXPECT_EQ(flags.GetDoubleAtLeast("drain-seconds", 1, 0).status().message(),
            "--drain-seconds must be at least 0, got -0.5");
  EXPECT_EQ(*flags.GetDoubleAtLeast("zero", 1, 0), 0);
  EXPECT_FALSE(flags.GetDoubleAtLeast("nan", 1, 0).ok());
  EXPECT_EQ(*flags.GetDoubleAtLeast("absent", 2.5, 0), 2.5);
}

// A worker's --step-port: off unless given, a port or 0 (a free one), and never beside TLS (the
// step socket has none).
TEST(WorkerServingTest, AStepPortIsOffByDefaultInRangeAndNotWithTls) {
  EXPECT_EQ(ParseWorkerServing(ParseOrDie({}))->step_port, -1);
  EXPECT_EQ(ParseWorkerServing(ParseOrDie({"--step-port", "0"}))->step_port, 0);
  EXPECT_EQ(ParseWorkerServing(ParseOrDie({"--step-port", "50061"}))->step_port, 50061);
  ServerOptions options;
  ParseWorkerServing(ParseOrDie({"--step-port", "50061"}))->ApplyTo(&options);
  EXPECT_EQ(options.step_port, 50061);
  for (const char* bad : {"-2", "65536"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseWorkerServing(ParseOrDie({"--step-port", bad})).status())) << bad;
  }
  // Files that pass as PEM (ValidateTlsFiles reads them, nothing more).
  const std::string pem = ::testing::TempDir() + "/step_port_test.pem";
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\n";
  const std::vector<std::string> tls = {"--tls-cert", pem, "--tls-key", pem, "--tls-client-ca", pem};
  std::vector<std::string> with_tls = tls;
  EXPECT_TRUE(ParseWorkerServing(ParseOrDie(with_tls)).ok());
  with_tls.insert(with_tls.end(), {"--step-port", "0"});
  absl::StatusOr<WorkerServing> refused = ParseWorkerServing(ParseOrDie(with_tls));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(refused.status().message().find("--step-port"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace splitspec::rpc
