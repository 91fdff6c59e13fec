// A step socket handler that echoes, and the calls that check a client against it: shared by
// the Unix socket and TCP tests.
#ifndef SPLITSPEC_TESTS_UNIT_RPC_STEP_ECHO_H_
#define SPLITSPEC_TESTS_UNIT_RPC_STEP_ECHO_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/step_socket_client.h"
#include "common/rpc/step_socket_wire.h"
#include "gtest/gtest.h"

namespace splitspec::rpc {

// Answers a Verify with "echo:" + its bytes; a request "fail" with NOT_FOUND; other methods
// with UNIMPLEMENTED.
inline absl::StatusOr<std::string> Echo(StepMethod method, const std::string& request, std::function<void()>*) {
  if (method != StepMethod::kVerify) return absl::UnimplementedError("only Verify");
  if (request == "fail") return absl::NotFoundError("no such session");
  return "echo:" + request;
}

// Three calls answered in order, a worker's errors passed back (NOT_FOUND with its message,
// UNIMPLEMENTED), and the connection alive after them.
inline void ExpectEchoesAndErrors(StepSocketClient& client) {
  bool sent = false;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> answer = client.Call(StepMethod::kVerify, std::to_string(i), absl::Seconds(10), &sent);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_TRUE(sent);
    EXPECT_EQ(*answer, "echo:" + std::to_string(i));
  }
  absl::StatusOr<std::string> failed = client.Call(StepMethod::kVerify, "fail", absl::Seconds(10));
  EXPECT_TRUE(absl::IsNotFound(failed.status()));
  EXPECT_EQ(failed.status().message(), "no such session");
  EXPECT_TRUE(absl::IsUnimplemented(client.Call(StepMethod::kPropose, "x", absl::Seconds(10)).status()));
  EXPECT_EQ(*client.Call(StepMethod::kVerify, "again", absl::Seconds(10)), "echo:again");
}

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_TESTS_UNIT_RPC_STEP_ECHO_H_
