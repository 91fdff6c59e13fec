// Getting the group id, by file or over the network (see tp_membership.h).
#include "verifier/tp_membership.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace splitspec::verifier {
namespace {

absl::StatusOr<std::string> PublishToFile(const std::string& path, const std::string& id) {
  // Written then renamed, so a rank that finds the file finds all of it.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << absl::BytesToHexString(id) << "\n";
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write --tp-id-file ", path));
  }
  return id;
}

absl::StatusOr<std::string> ReadFromFile(const std::string& path) {
  std::ifstream in(path);
  std::string hex;
  in >> hex;
  const std::string id = absl::HexStringToBytes(hex);
  if (!in || id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a tensor-parallel group id from --tp-id-file ", path,
                     " (start rank 0 first)"));
  }
  return id;
}

}  // namespace

absl::Status CheckTpMembershipOptions(const TpMembershipOptions& o) {
  const bool network = o.leader_port >= 0 || !o.leader.empty();
  if (!o.id_file.empty() && network) {
    return absl::InvalidArgumentError(
        "--tp-id-file and --tp-leader / --tp-leader-port are two ways to share the group id: use "
        "one");
  }
  if (o.id_file.empty() && !network) {
    return absl::InvalidArgumentError(
        "--tp-rank needs --tp-leader-port P on rank 0 and --tp-leader HOST:P on ranks 1..N-1 (or "
        "--tp-id-file F "
        "on every rank, one host)");
  }
  if (!network) return absl::OkStatus();
  if (o.rank == 0 && !o.leader.empty()) {
    return absl::InvalidArgumentError(
        "rank 0 is the leader: it listens on --tp-leader-port; --tp-leader HOST:PORT is for ranks "
        "1..N-1");
  }
  if (o.rank == 0 && (o.leader_port < 0 || o.leader_port > 65535)) {
    return absl::InvalidArgumentError(
        "rank 0 needs --tp-leader-port P (0..65535) to hand out the group id");
  }
  if (o.rank != 0 && o.leader_port >= 0) {
    return absl::InvalidArgumentError(
        "--tp-leader-port is rank 0's; ranks 1..N-1 connect to it with --tp-leader HOST:PORT");
  }
  if (o.rank != 0) {
    if (absl::StatusOr<std::pair<std::string, int>> a = ParseLeaderAddress(o.leader); !a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tp-leader: ", a.status().message()));
    }
  }
  if (o.join_timeout <= absl::ZeroDuration() || o.heartbeat_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--tp-join-seconds and --tp-heartbeat-seconds must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TpMembership>> TpMembership::Join(
    const TpMembershipOptions& o, const std::function<absl::StatusOr<std::string>()>& new_group_id,
    PeerLostCallback on_lost, const std::function<void(const std::string&)>& log) {
  if (absl::Status s = CheckTpMembershipOptions(o); !s.ok()) return s;
  std::unique_ptr<TpMembership> m(new TpMembership());
  absl::StatusOr<std::string> id;
  if (o.rank == 0) {
    id = new_group_id();
    if (!id.ok()) return id.status();
  }
  if (!o.id_file.empty()) {
    id = o.rank == 0 ? PublishToFile(o.id_file, *id) : ReadFromFile(o.id_file);
    if (!id.ok()) return id.status();
    if (o.rank == 0) log(absl::StrCat("rank 0 wrote the group id to ", o.id_file));
    m->group_id_ = *id;
    return m;
  }
  RendezvousOptions r;
  r.group_size = o.group_size;
  r.join_timeout = o.join_timeout;
  r.heartbeat_timeout = o.heartbeat_timeout;
  if (o.rank == 0) {
    auto leader = RendezvousLeader::Start(o.listen_host, o.leader_port, *id, r, std::move(on_lost));
    if (!leader.ok()) return leader.status();
    log(absl::StrCat("rank 0 waiting for ranks 1..", o.group_size - 1, " on port ",
                     (*leader)->port()));
    if (absl::Status joined = (*leader)->WaitForFollowers(); !joined.ok()) return joined;
    log(absl::StrCat("all ", o.group_size, " ranks joined"));
    m->leader_ = std::move(*leader);
    m->group_id_ = *id;
    return m;
  }
  const std::pair<std::string, int> address = *ParseLeaderAddress(o.leader);
  bool told = false;
  auto follower = RendezvousFollower::Join(
      address.first, address.second, o.rank, r, std::move(on_lost), [&](const absl::Status& why) {
        if (told) return;  // once: the retries go on quietly
        told = true;
        log(absl::StrCat("waiting for the leader at ", o.leader, " (", why.message(), ")"));
      });
  if (!follower.ok()) return follower.status();
  log(absl::StrCat("rank ", o.rank, " joined the leader at ", o.leader));
  m->group_id_ = (*follower)->group_id();
  m->follower_ = std::move(*follower);
  return m;
}

void TpMembership::Finish() {
  if (leader_ != nullptr) leader_->Finish();
  if (follower_ != nullptr) follower_->Finish();
}

}  // namespace splitspec::verifier
