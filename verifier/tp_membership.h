// A process's place in a multi-process tensor-parallel group: how it gets the group id that
// every rank passes to the communicator (NCCL), and, on the network way, the connection to its
// peers that stays open to report a lost one (verifier/tp_rendezvous.h). Two ways:
//   file     rank 0 writes the id to a file all ranks can read (one host, or a shared volume);
//            the others read it at start-up. Nothing watches the group.
//   network  rank 0 listens on a port and hands the id to ranks 1..N-1, which are given its
//            address; peers lost afterwards are reported through `on_lost`.
// Knows nothing of NCCL: the caller supplies how rank 0 makes a new id.
#ifndef SPLITSPEC_VERIFIER_TP_MEMBERSHIP_H_
#define SPLITSPEC_VERIFIER_TP_MEMBERSHIP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verifier/tp_rendezvous.h"

namespace splitspec::verifier {

struct TpMembershipOptions {
  int group_size = 1;
  int rank = 0;
  std::string id_file;      // the file way (else the network way)
  std::string listen_host;  // rank 0, network way: where it listens
  int leader_port = -1;     // rank 0, network way
  std::string leader;       // ranks 1..N-1, network way: rank 0's HOST:PORT
  absl::Duration join_timeout = absl::Seconds(300);
  absl::Duration heartbeat_timeout = absl::Seconds(15);
};

// Which way `options` asks for, checked for consistency (the flag names are the binary's):
// INVALID_ARGUMENT naming what is missing or misplaced.
absl::Status CheckTpMembershipOptions(const TpMembershipOptions& options);

class TpMembership {
 public:
  // Rank 0 makes the id with `new_group_id`, publishes it, and (network way) waits until every
  // follower has joined. Other ranks wait for it (file: it must exist already; network: up to
  // join_timeout). `log` receives progress lines (joined, waiting for the leader).
  static absl::StatusOr<std::unique_ptr<TpMembership>> Join(
      const TpMembershipOptions& options,
      const std::function<absl::StatusOr<std::string>()>& new_group_id, PeerLostCallback on_lost,
      const std::function<void(const std::string&)>& log);

  const std::string& group_id() const { return group_id_; }
  // The group ended in order (rank 0 sent its shutdown; a follower left its loop): peers are
  // told, and stop watching this rank. Destroying without Finish tells them it was lost.
  void Finish();

 private:
  TpMembership() = default;

  std::string group_id_;
  std::unique_ptr<RendezvousLeader> leader_;
  std::unique_ptr<RendezvousFollower> follower_;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_TP_MEMBERSHIP_H_
