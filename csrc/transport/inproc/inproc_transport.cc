// The in-process transport (inproc_transport.h): ranks as threads, a mailbox per receiving rank.
//
// A message is matched by (communicator context, sending rank, tag) in the receiver's mailbox,
// first posted with first posted, so messages of one (peer, tag) on one Comm arrive in order.
// Whichever side comes second does the copy: a send finding its receive posted copies straight
// into it; otherwise an eager send leaves a copy in the mailbox (and is complete at once), and a
// rendezvous send (above the world's eager limit) leaves its address, which the receive copies
// from. Copies run outside the mailbox's lock: an entry taken off a queue belongs to the taker.
// A transfer still pending is an Op behind its Transfer handle; the side that completes it sets
// `done` last, and the owner's test deletes it once it sees `done` (the world frees the ones
// never tested again).
#include "transport/inproc/inproc_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

namespace hvd {

namespace {

struct Op {
  std::atomic<bool> done{false};
};

struct PendingSend {
  std::vector<char> copy;      // an eager send's bytes
  const char* data = nullptr;  // a rendezvous send's buffer (op != null)
  size_t bytes = 0;
  Op* op = nullptr;
};

struct PendingRecv {
  char* data = nullptr;
  size_t bytes = 0;
  Op* op = nullptr;
  size_t* received = nullptr;  // IrecvUpTo's: `bytes` is a capacity, the length goes here
};

struct Queue {
  std::deque<PendingSend> sends;
  std::deque<PendingRecv> recvs;
};

// (context, sender's world rank, tag)
using Key = std::tuple<uint64_t, int, int>;

struct Mailbox {
  std::mutex mu;
  std::map<Key, Queue> queues;
};

// Wakes a rank's naps when another thread completes one of its transfers.
struct Waker {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<uint64_t> events{0};
};

[[noreturn]] void Fatal(const std::string& why) {
  std::fprintf(stderr, "[horovod inproc] FATAL: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

void CheckSizes(size_t send_bytes, size_t recv_bytes, bool up_to, int src, int dst, int tag) {
  // Stricter than MPI (which allows a larger receive): ops always post equal sizes, and a test
  // transport should catch the ones that do not. Only IrecvUpTo takes a shorter message.
  if (up_to ? send_bytes > recv_bytes : send_bytes != recv_bytes)
    Fatal("a send of " + std::to_string(send_bytes) + " bytes from rank " + std::to_string(src) +
          " met a receive of " + std::to_string(recv_bytes) + " bytes on rank " +
          std::to_string(dst) + " (tag " + std::to_string(tag) + ")");
}

}  // namespace

struct InprocWorld::Impl {
  int size = 1, ranks_per_host = 0;
  std::atomic<size_t> eager_limit{SIZE_MAX};
  std::vector<std::unique_ptr<Mailbox>> boxes;  // by receiving world rank
  std::vector<std::unique_ptr<Waker>> wakers;   // by world rank
  // Communicator contexts: every member asking for (parent, purpose, members) gets one id.
  std::mutex ctx_mu;
  std::map<std::tuple<uint64_t, int, std::vector<int>>, uint64_t> contexts;
  uint64_t next_ctx = 1;  // 0: the world's
  // Ops not yet retired by a test, freed with the world: a transfer given up on (a barrier's
  // timeout) is never tested again.
  std::mutex ops_mu;
  std::unordered_set<Op*> live_ops;

  ~Impl() {
    for (Op* op : live_ops) delete op;
  }

  Op* NewOp() {
    Op* op = new Op;
    std::lock_guard<std::mutex> l(ops_mu);
    live_ops.insert(op);
    return op;
  }
  void DeleteOp(Op* op) {
    {
      std::lock_guard<std::mutex> l(ops_mu);
      live_ops.erase(op);
    }
    delete op;
  }

  void Wake(int rank) {
    Waker& w = *wakers[rank];
    {
      std::lock_guard<std::mutex> l(w.mu);
      w.events.fetch_add(1, std::memory_order_release);
    }
    w.cv.notify_all();
  }

  uint64_t Context(uint64_t parent, int purpose, const std::vector<int>& world_members) {
    std::lock_guard<std::mutex> l(ctx_mu);
    auto it = contexts.emplace(std::make_tuple(parent, purpose, world_members), next_ctx).first;
    if (it->second == next_ctx) ++next_ctx;
    return it->second;
  }
};

InprocWorld::InprocWorld(int size, int ranks_per_host) : impl_(new Impl) {
  if (size < 1) Fatal("an inproc world needs at least one rank");
  impl_->size = size;
  impl_->ranks_per_host = ranks_per_host;
  for (int r = 0; r < size; ++r) {
    impl_->boxes.emplace_back(new Mailbox);
    impl_->wakers.emplace_back(new Waker);
  }
}

InprocWorld::~InprocWorld() = default;
int InprocWorld::size() const { return impl_->size; }
int InprocWorld::ranks_per_host() const { return impl_->ranks_per_host; }
void InprocWorld::set_eager_limit(size_t bytes) { impl_->eager_limit.store(bytes); }
size_t InprocWorld::eager_limit() const { return impl_->eager_limit.load(); }

namespace {

class InprocComm : public Comm {
 public:
  // `members`: the world ranks of this Comm's ranks; `rank`: this one's index among them.
  InprocComm(std::shared_ptr<InprocWorld> world, uint64_t ctx, std::vector<int> members, int rank)
      : world_(std::move(world)), w_(world_->impl()), ctx_(ctx), members_(std::move(members)) {
    rank_ = rank;
    size_ = static_cast<int>(members_.size());
    me_ = members_[rank];
  }

  uint64_t context() const { return ctx_; }
  const std::vector<int>& members() const { return members_; }

  Transfer Isend(const void* data, size_t bytes, int peer, int tag) override {
    const int dst = WorldPeer(peer, "send to");
    Mailbox& box = *w_.boxes[dst];
    PendingRecv recv;
    Op* op = nullptr;
    {
      std::lock_guard<std::mutex> l(box.mu);
      auto it = box.queues.try_emplace(Key{ctx_, me_, tag}).first;
      Queue& q = it->second;
      if (!q.recvs.empty()) {
        recv = q.recvs.front();
        q.recvs.pop_front();
        if (q.recvs.empty() && q.sends.empty()) box.queues.erase(it);
      } else {
        PendingSend s;
        s.bytes = bytes;
        if (bytes <= w_.eager_limit.load(std::memory_order_relaxed)) {
          s.copy.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
        } else {
          s.data = static_cast<const char*>(data);
          s.op = op = w_.NewOp();
        }
        q.sends.push_back(std::move(s));
        return Transfer{op};
      }
    }
    CheckSizes(bytes, recv.bytes, recv.received != nullptr, me_, dst, tag);
    if (bytes > 0) std::memcpy(recv.data, data, bytes);
    if (recv.received) *recv.received = bytes;
    recv.op->done.store(true, std::memory_order_release);
    w_.Wake(dst);
    return Transfer{};
  }

  Transfer Irecv(void* data, size_t bytes, int peer, int tag) override {
    return Receive(data, bytes, peer, tag, nullptr);
  }

  Transfer IrecvUpTo(void* data, size_t capacity, int peer, int tag, size_t* received) override {
    return Receive(data, capacity, peer, tag, received);
  }

  // `received` null: exactly `bytes`; else up to `bytes`, the length into *received.
  Transfer Receive(void* data, size_t bytes, int peer, int tag, size_t* received) {
    const int src = WorldPeer(peer, "receive from");
    Mailbox& box = *w_.boxes[me_];
    PendingSend send;
    {
      std::lock_guard<std::mutex> l(box.mu);
      auto it = box.queues.try_emplace(Key{ctx_, src, tag}).first;
      Queue& q = it->second;
      if (q.sends.empty()) {
        Op* op = w_.NewOp();
        q.recvs.push_back(PendingRecv{static_cast<char*>(data), bytes, op, received});
        return Transfer{op};
      }
      send = std::move(q.sends.front());
      q.sends.pop_front();
      if (q.recvs.empty() && q.sends.empty()) box.queues.erase(it);
    }
    CheckSizes(send.bytes, bytes, received != nullptr, src, me_, tag);
    if (send.bytes > 0) std::memcpy(data, send.op ? send.data : send.copy.data(), send.bytes);
    if (received) *received = send.bytes;
    if (send.op) {
      send.op->done.store(true, std::memory_order_release);
      w_.Wake(src);
    }
    return Transfer{};
  }

  bool TestAll(int n, Transfer* t) override {
    Snapshot();
    bool all = true;
    for (int i = 0; i < n; ++i)
      if (!Retire(&t[i])) all = false;
    return all;
  }

  int TestAny(int n, Transfer* t, bool* all_idle) override {
    Snapshot();
    bool idle = true;
    for (int i = 0; i < n; ++i) {
      if (!t[i].handle) continue;
      idle = false;
      if (Retire(&t[i])) {
        *all_idle = false;
        return i;
      }
    }
    *all_idle = idle;
    return -1;
  }

  // Sleeps until another thread completes a transfer of this rank after the last test, or `us`.
  void Nap(long us) override {
    Waker& w = *w_.wakers[me_];
    std::unique_lock<std::mutex> l(w.mu);
    w.cv.wait_for(l, std::chrono::microseconds(us),
                  [&] { return w.events.load(std::memory_order_acquire) != seen_; });
  }

  // Each Comm's state is its own and the mailboxes are locked: threads may drive separate Comms.
  bool ThreadsMultiple() const override { return true; }

 private:
  int WorldPeer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_)
      Fatal("rank " + std::to_string(me_) + " cannot " + what + " rank " + std::to_string(peer) +
            " of a communicator of " + std::to_string(size_));
    return members_[peer];
  }
  void Snapshot() { seen_ = w_.wakers[me_]->events.load(std::memory_order_acquire); }
  // True if `t` is complete now (it is then default).
  bool Retire(Transfer* t) {
    if (!t->handle) return true;
    Op* op = static_cast<Op*>(t->handle);
    if (!op->done.load(std::memory_order_acquire)) return false;
    w_.DeleteOp(op);
    t->handle = nullptr;
    return true;
  }

  std::shared_ptr<InprocWorld> world_;  // keeps the mailboxes alive
  InprocWorld::Impl& w_;
  uint64_t ctx_;
  std::vector<int> members_;
  int me_ = 0;         // this rank's world rank
  uint64_t seen_ = 0;  // the waker's count at the last test: Nap returns once it moves
};

// Purpose of a process set's Comm (TopologyFromHostKeys uses 1 and 2 for local and cross).
constexpr int kSubsetPurpose = -1;

class InprocTransport : public Transport {
 public:
  explicit InprocTransport(std::shared_ptr<InprocWorld> world) : world_(std::move(world)) {
    threads_multiple = true;
    ranks_per_host = world_->ranks_per_host();
  }

  // Installs `comm` as comm() and builds the topology over it (collective).
  void Start(std::unique_ptr<Comm> comm) {
    rank = comm->rank();
    size = comm->size();
    comm_ = std::move(comm);
    TopologyFromHostKeys("inproc");
  }

  const char* Name() const override { return "inproc"; }

  Status Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) override {
    out->reset();
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] < 0 || ranks[i] >= size || (i > 0 && ranks[i] <= ranks[i - 1]))
        return Status::InvalidArgument(
            "a process set's ranks must be ascending ranks of the set: " + RankList(ranks));
    if (!std::binary_search(ranks.begin(), ranks.end(), rank)) return Status();
    auto t = std::make_unique<InprocTransport>(world_);
    t->world_ranks = WorldRanks(ranks);
    t->Start(SubComm(ranks, kSubsetPurpose));
    *out = std::move(t);
    return Status();
  }

  void Finalize() override {}

  [[noreturn]] void Abort(const std::string& why) override { Fatal(why); }

 protected:
  std::unique_ptr<Comm> SubComm(const std::vector<int>& members, int purpose) override {
    const auto& parent = static_cast<InprocComm&>(*comm_);
    std::vector<int> world_members;
    int me = -1;
    for (int m : members) {
      if (m < 0 || m >= size) Fatal("SubComm: rank " + std::to_string(m) + " is not in the set");
      if (m == rank) me = static_cast<int>(world_members.size());
      world_members.push_back(parent.members()[m]);
    }
    if (me < 0)
      Fatal("SubComm: rank " + std::to_string(rank) + " is not among " + RankList(members));
    const uint64_t ctx = world_->impl().Context(parent.context(), purpose, world_members);
    return std::make_unique<InprocComm>(world_, ctx, std::move(world_members), me);
  }

 private:
  std::shared_ptr<InprocWorld> world_;
};

}  // namespace

std::unique_ptr<Transport> MakeInprocTransport(std::shared_ptr<InprocWorld> world, int rank) {
  const int n = world->size();
  if (rank < 0 || rank >= n)
    Fatal("rank " + std::to_string(rank) + " is not in an inproc world of " + std::to_string(n));
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  auto t = std::make_unique<InprocTransport>(world);
  t->Start(std::make_unique<InprocComm>(world, 0, std::move(all), rank));
  return t;
}

}  // namespace hvd
