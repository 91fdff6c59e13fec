// What the kubelet's native gRPC probe does: one grpc.health.v1 Check of the whole server ("")
// on 127.0.0.1:PORT. Exit 0 when SERVING, 1 otherwise (with the reason on stderr).
// Usage: grpc_probe PORT
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "common/rpc/worker_clients.h"

int main(int argc, char** argv) {
  int port = 0;
  if (argc != 2 || !absl::SimpleAtoi(argv[1], &port) || port <= 0 || port > 65535) {
    std::fprintf(stderr, "usage: grpc_probe PORT\n");
    return 2;
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const absl::Status status =
      splitspec::rpc::CheckHealth(splitspec::rpc::MakeChannel(address), "", absl::Seconds(5));
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", address.c_str(), std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
