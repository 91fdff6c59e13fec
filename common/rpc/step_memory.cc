// Step frames through shared memory (see step_memory.h).
#include "common/rpc/step_memory.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {
namespace {

constexpr uint32_t kMemoryMagic = 0x4d4b5353;  // "SSKM"
constexpr uint32_t kMemoryVersion = 1;
// The headers' page; each mailbox's payload room follows, the request's first.
constexpr size_t kHeaderPageBytes = 4096;
constexpr size_t kPayloadRoom = kMaxStepPayloadBytes;
constexpr size_t kMemoryBytes = kHeaderPageBytes + 2 * kPayloadRoom;

// The steady clock (CLOCK_MONOTONIC: one clock for every process on the host), never 0.
int64_t SteadyNanos() {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
  return std::max<int64_t>(ns, 1);
}

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("step memory: ", what, ": ", std::strerror(errno)));
}

}  // namespace

// Shared with the peer: only lock-free atomics (address-free, so they work across processes)
// and plain sizes that are checked before use.
struct StepMemory::Mailbox {
  alignas(64) std::atomic<uint32_t> published;
  std::atomic<uint32_t> reader_asleep;
  // Written before `published` moves, read after: ordered by it.
  std::atomic<uint32_t> word;
  std::atomic<uint32_t> bytes;
  // Written before `published` moves, as the three above (frame_pickup.h; 0: not stamped).
  std::atomic<int64_t> published_at_ns;
};

struct StepMemory::Region {
  uint32_t magic;
  uint32_t version;
  uint64_t payload_room;
  Mailbox request;  // client -> server
  Mailbox answer;   // server -> client
};

StepMemory::StepMemory(int fd, void* base, size_t size) : fd_(fd), base_(base), size_(size) {}

StepMemory::~StepMemory() {
  munmap(base_, size_);
  close(fd_);
}

absl::StatusOr<std::unique_ptr<StepMemory>> StepMemory::Create() {
  static_assert(sizeof(Region) <= kHeaderPageBytes, "the headers fit their page");
  static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
                "shared atomics must be lock-free");
  const int fd = memfd_create("splitspec-step", MFD_CLOEXEC);
  if (fd < 0) return Errno("memfd_create");
  // Sparse: only the pages that frames reach are ever used.
  if (ftruncate(fd, static_cast<off_t>(kMemoryBytes)) != 0) {
    const absl::Status s = Errno("ftruncate");
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, kMemoryBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const absl::Status s = Errno("mmap");
    close(fd);
    return s;
  }
  // A new memfd reads as zeros: counts and flags start at 0.
  Region* region = new (base) Region{};
  region->magic = kMemoryMagic;
  region->version = kMemoryVersion;
  region->payload_room = kPayloadRoom;
  return std::unique_ptr<StepMemory>(new StepMemory(fd, base, kMemoryBytes));
}

absl::StatusOr<std::unique_ptr<StepMemory>> StepMemory::Map(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const absl::Status s = Errno("fstat");
    close(fd);
    return s;
  }
  if (static_cast<uint64_t>(st.st_size) != kMemoryBytes) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("step memory of ", st.st_size, " bytes, expected ", kMemoryBytes));
  }
  void* base = mmap(nullptr, kMemoryBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const absl::Status s = Errno("mmap");
    close(fd);
    return s;
  }
  std::unique_ptr<StepMemory> memory(new StepMemory(fd, base, kMemoryBytes));
  const Region* region = static_cast<const Region*>(base);
  if (region->magic != kMemoryMagic || region->version != kMemoryVersion || region->payload_room != kPayloadRoom) {
    return absl::InvalidArgumentError("step memory: not a step memory of this version");
  }
  return memory;
}

StepMemory::Mailbox& StepMemory::Writes(Side side) {
  Region* region = static_cast<Region*>(base_);
  return side == Side::kClient ? region->request : region->answer;
}

StepMemory::Mailbox& StepMemory::Reads(Side side) {
  Region* region = static_cast<Region*>(base_);
  return side == Side::kClient ? region->answer : region->request;
}

char* StepMemory::PayloadOf(const Mailbox& mailbox) {
  const Region* region = static_cast<const Region*>(base_);
  const size_t offset = &mailbox == &region->request ? kHeaderPageBytes : kHeaderPageBytes + kPayloadRoom;
  return static_cast<char*>(base_) + offset;
}

absl::Status StepMemory::Write(Side side, int socket, uint32_t word, absl::string_view payload) {
  if (payload.size() > kMaxStepPayloadBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("step socket message of ", payload.size(), " bytes exceeds ", kMaxStepPayloadBytes));
  }
  Mailbox& mailbox = Writes(side);
  if (!payload.empty()) std::memcpy(PayloadOf(mailbox), payload.data(), payload.size());
  mailbox.word.store(word, std::memory_order_relaxed);
  mailbox.bytes.store(static_cast<uint32_t>(payload.size()), std::memory_order_relaxed);
  mailbox.published_at_ns.store(SteadyNanos(), std::memory_order_relaxed);
  mailbox.published.store(++written_, std::memory_order_seq_cst);
  // Seen after the count moved (both sequentially consistent): a reader that went to sleep
  // before it is rung; one that checks the count after it needs no doorbell.
  if (mailbox.reader_asleep.load(std::memory_order_seq_cst) == 0) return absl::OkStatus();
  const char doorbell = 0;
  for (;;) {
    const ssize_t n = send(socket, &doorbell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == 1) return absl::OkStatus();
    if (n < 0 && errno == EINTR) continue;
    // A full socket holds doorbells the reader has not drained: it wakes without this one.
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return absl::OkStatus();
    return Errno("doorbell");
  }
}

absl::Status StepMemory::SleepUntilPublished(Mailbox& mailbox, uint32_t seen, int socket, absl::Time wake) {
  mailbox.reader_asleep.store(1, std::memory_order_seq_cst);
  if (mailbox.published.load(std::memory_order_seq_cst) != seen) {
    mailbox.reader_asleep.store(0, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  pollfd p{socket, POLLIN, 0};
  timespec timeout{};
  const timespec* timeout_or_none = nullptr;
  if (wake != absl::InfiniteFuture()) {
    timeout = absl::ToTimespec(std::max(absl::ZeroDuration(), wake - absl::Now()));
    timeout_or_none = &timeout;
  }
  const int ready = ppoll(&p, 1, timeout_or_none, nullptr);
  mailbox.reader_asleep.store(0, std::memory_order_relaxed);
  if (ready < 0 && errno != EINTR) return Errno("poll");
  if (ready <= 0) return absl::OkStatus();
  return DrainSocket(mailbox, seen, socket);
}

absl::Status StepMemory::DrainSocket(Mailbox& mailbox, uint32_t seen, int socket) {
  // Doorbells (any number: some may be left from a wait that ended in a spin) or the end.
  char drained[64];
  for (;;) {
    const ssize_t n = recv(socket, drained, sizeof(drained), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return absl::OkStatus();
    // Closed or reset. A frame published before that is still read.
    if (mailbox.published.load(std::memory_order_acquire) != seen) return absl::OkStatus();
    if (n == 0) return absl::UnavailableError("step socket closed by the peer");
    return Errno("read");
  }
}

absl::Status StepMemory::Read(Side side, int socket, absl::Time deadline, uint32_t* word, std::string* payload,
                              const SpinWindow& spin, std::optional<FramePickup>* pickup) {
  Mailbox& mailbox = Reads(side);
  absl::Time socket_checked = absl::InfinitePast();  // set on the first spin
  // How the reader was waiting when the frame came: what it did after its last look.
  FramePickup::Wait wait = FramePickup::Wait::kReady;
  while (mailbox.published.load(std::memory_order_acquire) == read_) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("step socket call timed out");
    if (spin.Contains(now)) {
      wait = FramePickup::Wait::kSpinning;
      // As on the socket: a thread that wants this CPU (the peer about to publish) runs first.
      sched_yield();
      // The socket's end (a peer gone, a server stopping) is seen within a millisecond.
      if (socket_checked == absl::InfinitePast()) socket_checked = now;
      if (now - socket_checked >= absl::Milliseconds(1)) {
        socket_checked = now;
        pollfd p{socket, POLLIN, 0};
        if (poll(&p, 1, 0) > 0) {
          if (absl::Status s = DrainSocket(mailbox, read_, socket); !s.ok()) return s;
        }
      }
      continue;
    }
    wait = spin.Closed(now) ? FramePickup::Wait::kAsleepAfterWindow : FramePickup::Wait::kAsleepBeforeWindow;
    const absl::Time wake = std::min(deadline, spin.NextStart(now));
    if (absl::Status s = SleepUntilPublished(mailbox, read_, socket, wake); !s.ok()) return s;
  }
  // Calls alternate, so the writer is exactly one frame ahead; anything else is not our peer.
  if (mailbox.published.load(std::memory_order_acquire) != read_ + 1) {
    return absl::InvalidArgumentError("step memory: frames out of step");
  }
  ++read_;
  const uint32_t bytes = mailbox.bytes.load(std::memory_order_relaxed);
  if (bytes > kMaxStepPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("step memory: payload of ", bytes, " bytes exceeds ",
                                                   kMaxStepPayloadBytes));
  }
  *word = mailbox.word.load(std::memory_order_relaxed);
  payload->assign(PayloadOf(mailbox), bytes);
  if (pickup != nullptr) {
    const int64_t published_at = mailbox.published_at_ns.load(std::memory_order_relaxed);
    if (published_at > 0) {
      *pickup = FramePickup{wait, absl::Nanoseconds(std::max<int64_t>(0, SteadyNanos() - published_at))};
    } else {
      pickup->reset();
    }
  }
  return absl::OkStatus();
}

absl::Status WriteConnectionFrame(StepMemory* memory, StepMemory::Side side, int socket, uint32_t word,
                                  absl::string_view payload) {
  return memory != nullptr ? memory->Write(side, socket, word, payload) : WriteStepFrame(socket, word, payload);
}

absl::Status ReadConnectionFrame(StepMemory* memory, StepMemory::Side side, int socket, absl::Time deadline,
                                 uint32_t* word, std::string* payload, const SpinWindow& spin,
                                 std::optional<FramePickup>* pickup) {
  if (memory != nullptr) return memory->Read(side, socket, deadline, word, payload, spin, pickup);
  if (pickup != nullptr) pickup->reset();
  return ReadStepFrame(socket, deadline, word, payload, spin);
}

namespace {

// One byte with room for one descriptor beside it (SCM_RIGHTS), as sendmsg and recvmsg take it.
struct ByteWithDescriptor {
  ByteWithDescriptor() {
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
  }
  ByteWithDescriptor(const ByteWithDescriptor&) = delete;  // points into itself
  ByteWithDescriptor& operator=(const ByteWithDescriptor&) = delete;

  char byte = 'M';
  iovec part{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
};

}  // namespace

absl::Status SendStepMemory(int socket, const StepMemory& memory) {
  if (absl::Status s = WriteStepFrame(socket, static_cast<uint32_t>(absl::StatusCode::kOk), ""); !s.ok()) return s;
  ByteWithDescriptor sent;
  cmsghdr* header = CMSG_FIRSTHDR(&sent.message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = memory.fd();
  std::memcpy(CMSG_DATA(header), &fd, sizeof(fd));
  for (;;) {
    const ssize_t n = sendmsg(socket, &sent.message, MSG_NOSIGNAL);
    if (n == 1) return absl::OkStatus();
    if (n < 0 && errno == EINTR) continue;
    return Errno("passing the memory");
  }
}

namespace {

// Receives the one byte that carries a descriptor: the descriptor, or -1 when the byte came
// without one.
absl::StatusOr<int> ReceiveDescriptor(int socket, absl::Time deadline) {
  for (;;) {
    ByteWithDescriptor received;
    const ssize_t n = recvmsg(socket, &received.message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n == 1) {
      const cmsghdr* header = CMSG_FIRSTHDR(&received.message);
      if (header == nullptr || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS ||
          header->cmsg_len != CMSG_LEN(sizeof(int))) {
        return -1;
      }
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof(fd));
      return fd;
    }
    if (n == 0) return absl::UnavailableError("step socket closed by the peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Errno("read");
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("step socket: no memory before the deadline");
    pollfd p{socket, POLLIN, 0};
    const timespec timeout = absl::ToTimespec(std::min(deadline - now, absl::Seconds(1)));
    if (ppoll(&p, 1, &timeout, nullptr) < 0 && errno != EINTR) return Errno("poll");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepMemory>> OpenStepMemory(int socket, absl::Time deadline) {
  if (absl::Status s = WriteStepFrame(socket, static_cast<uint32_t>(StepMethod::kOpenMemory), ""); !s.ok()) return s;
  uint32_t code = 0;
  std::string message;
  if (absl::Status s = ReadStepFrame(socket, deadline, &code, &message); !s.ok()) return s;
  if (code != static_cast<uint32_t>(absl::StatusCode::kOk)) return std::unique_ptr<StepMemory>();
  absl::StatusOr<int> fd = ReceiveDescriptor(socket, deadline);
  if (!fd.ok()) return fd.status();
  if (*fd < 0) return absl::UnavailableError("step socket: the memory came without its descriptor");
  absl::StatusOr<std::unique_ptr<StepMemory>> memory = StepMemory::Map(*fd);
  if (!memory.ok()) return absl::UnavailableError(memory.status().message());
  return memory;
}

}  // namespace splitspec::rpc
