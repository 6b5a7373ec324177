// The waits every transport shares, and the control rounds and small collectives over any
// transport's point-to-point (MPI overrides the latter with its own collectives).
#include "transport/transport.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/logging.h"
#include "common/watch_progress.h"

namespace hvd {
namespace {

std::atomic<int64_t> data_wait_spin_us{1000};
std::atomic<bool> spin_yields{false};

void SleepMicros(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

// Polls `test` until it reports done: spins for spin_us, then naps between tests, from 10 us
// doubling up to max_nap_us. With SetSpinYields(true) each spin step yields the core first: a
// training thread sharing it runs on, and the poll comes back when it blocks.
template <typename Test>
void PollWithNaps(Comm* c, const Test& test, int64_t spin_us, long max_nap_us) {
  if (test()) return;
  const bool yields = spin_yields.load(std::memory_order_relaxed);
  const int64_t start = NowMicros();
  while (NowMicros() - start < spin_us) {
    if (yields) sched_yield();
    if (test()) return;
  }
  long nap_us = 10;
  while (!test()) {
    if (c)
      c->Nap(nap_us);
    else
      SleepMicros(nap_us);
    nap_us = std::min(nap_us * 2, max_nap_us);
  }
}

}  // namespace

void SetDataWaitSpin(int64_t us) { data_wait_spin_us.store(us, std::memory_order_relaxed); }
int64_t DataWaitSpin() { return data_wait_spin_us.load(std::memory_order_relaxed); }
void SetSpinYields(bool yields) { spin_yields.store(yields, std::memory_order_relaxed); }

void PollUntil(const std::function<bool()>& test, int64_t spin_us, long max_nap_us, Comm* napper) {
  PollWithNaps(napper, test, spin_us, max_nap_us);
}

void Comm::Nap(long us) { SleepMicros(us); }

Transfer Comm::IrecvUpTo(void*, size_t, int, int, size_t*) {
  // A programming error, not a network failure: nothing could recover from it.
  std::fprintf(stderr, "[horovod] FATAL: this transport has no IrecvUpTo\n");
  std::abort();
}

void Comm::WaitAll(int n, Transfer* t) { WaitAllPolling(n, t, DataWaitSpin(), 100); }

void Comm::WaitAllPolling(int n, Transfer* t, int64_t spin_us, long max_nap_us) {
  PollWithNaps(this, [&] { return TestAll(n, t); }, spin_us, max_nap_us);
}

int Comm::WaitAny(int n, Transfer* t) {
  int index = -1;
  PollWithNaps(
      this,
      [&] {
        bool idle = false;
        index = TestAny(n, t, &idle);
        return index >= 0 || idle;
      },
      DataWaitSpin(), 100);
  return index;
}

// Pipelined chain from the root: rank root+i receives a piece from root+i-1 and passes it on
// while the next arrives. Each rank sends and receives `bytes` once; n-1 + pieces steps.
void Comm::Bcast(void* data, size_t bytes, int root) {
  if (size_ == 1 || bytes == 0) return;
  constexpr size_t kPiece = size_t(1) << 20;
  const int pos = (rank_ - root + size_) % size_;
  const int prev = (rank_ - 1 + size_) % size_, next = (rank_ + 1) % size_;
  const bool last = pos == size_ - 1;
  char* p = static_cast<char*>(data);
  std::vector<Transfer> sends;
  for (size_t off = 0; off < bytes; off += kPiece) {
    const size_t len = std::min(kPiece, bytes - off);
    if (pos != 0) {
      Transfer r = Irecv(p + off, len, prev, kTagBcast);
      WaitAll(1, &r);
      WatchProgress();
    }
    if (!last) sends.push_back(Isend(p + off, len, next, kTagBcast));
  }
  WaitAll(&sends);
}

void Comm::Allgather(const void* mine, size_t bytes, void* all) {
  char* out = static_cast<char*>(all);
  if (bytes > 0) std::memcpy(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
  std::vector<Transfer> t;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    t.push_back(Irecv(out + static_cast<size_t>(q) * bytes, bytes, q, kTagAllgather));
    t.push_back(Isend(mine, bytes, q, kTagAllgather));
  }
  WaitAll(&t);
}

void Comm::AlltoallInt64(const int64_t* send, int64_t* recv) {
  recv[rank_] = send[rank_];
  std::vector<Transfer> t;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    t.push_back(Irecv(&recv[q], sizeof(int64_t), q, kTagAlltoall));
    t.push_back(Isend(&send[q], sizeof(int64_t), q, kTagAlltoall));
  }
  WaitAll(&t);
}

std::string Transport::ProcessorName() const {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

// Every rank's words on every rank, then the AND on each: n-1 messages each way, which for the
// few words of the response cache's bit vector is one latency.
void Transport::BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work) {
  const size_t bytes = bits->size() * sizeof(uint64_t);
  std::vector<uint64_t> all(bits->size() * size);
  std::vector<Transfer> t;
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    t.push_back(comm_->Irecv(&all[q * bits->size()], bytes, q, kTagRound));
    t.push_back(comm_->Isend(bits->data(), bytes, q, kTagRound));
  }
  comm_->WaitAllPolling(static_cast<int>(t.size()), t.data(), has_work ? 500 : 0, 200);
  for (int q = 0; q < size; ++q)
    if (q != rank)
      for (size_t i = 0; i < bits->size(); ++i) (*bits)[i] &= all[q * bits->size() + i];
}

void Transport::BitOrAllreduce(std::vector<uint64_t>* bits) {
  std::vector<uint64_t> all(bits->size() * size);
  comm_->Allgather(bits->data(), bits->size() * sizeof(uint64_t), all.data());
  for (int q = 0; q < size; ++q)
    for (size_t i = 0; i < bits->size(); ++i) (*bits)[i] |= all[q * bits->size() + i];
}

// One message each way per peer, received up to `capacity` bytes: one latency. (A length and then
// the bytes took two: 4 KiB eager allreduces over TCP at 2 ranks spent most of their time in it.)
void Transport::ExchangeRound(const std::vector<char>& mine, size_t capacity,
                              std::vector<std::vector<char>>* all, std::vector<size_t>* lens,
                              bool has_work) {
  if (mine.size() > capacity)
    Abort("a round message of " + std::to_string(mine.size()) + " bytes, more than the " +
          std::to_string(capacity) + " every rank agreed on");
  all->resize(size);
  lens->assign(size, 0);
  std::vector<Transfer> t;
  t.reserve(2 * size);
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    if ((*all)[q].size() < capacity) (*all)[q].resize(capacity);
    t.push_back(comm_->IrecvUpTo((*all)[q].data(), capacity, q, kTagRound, &(*lens)[q]));
  }
  for (int q = 0; q < size; ++q)
    if (q != rank) t.push_back(comm_->Isend(mine.data(), mine.size(), q, kTagRound));
  comm_->WaitAllPolling(static_cast<int>(t.size()), t.data(), has_work ? 500 : 0, 200);
}

std::vector<std::string> Transport::GatherToRoot(const std::string& blob) {
  std::vector<std::string> out;
  const uint64_t len = blob.size();
  if (rank != 0) {
    Transfer t[2] = {comm_->Isend(&len, sizeof(len), 0, kTagGather),
                     comm_->Isend(blob.data(), blob.size(), 0, kTagGather)};
    comm_->WaitAll(2, t);
    return out;
  }
  out.resize(size);
  out[0] = blob;
  std::vector<uint64_t> lens(size, 0);
  std::vector<Transfer> t;
  for (int q = 1; q < size; ++q)
    t.push_back(comm_->Irecv(&lens[q], sizeof(uint64_t), q, kTagGather));
  comm_->WaitAll(&t);
  for (int q = 1; q < size; ++q) {
    out[q].resize(lens[q]);
    t.push_back(comm_->Irecv(&out[q][0], lens[q], q, kTagGather));
  }
  comm_->WaitAll(&t);
  return out;
}

void Transport::BroadcastFromRoot(std::string* blob) {
  uint64_t len = blob->size();
  comm_->Bcast(&len, sizeof(len), 0);
  blob->resize(len);
  comm_->Bcast(&(*blob)[0], len, 0);
}

std::vector<std::string> Transport::AllgatherStrings(const std::string& blob) {
  const uint64_t len = blob.size();
  std::vector<uint64_t> lens(size);
  comm_->Allgather(&len, sizeof(len), lens.data());
  std::vector<std::string> out(size);
  out[rank] = blob;
  std::vector<Transfer> t;
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    out[q].resize(lens[q]);
    t.push_back(comm_->Irecv(&out[q][0], lens[q], q, kTagAllgather));
    t.push_back(comm_->Isend(blob.data(), blob.size(), q, kTagAllgather));
  }
  comm_->WaitAll(&t);
  return out;
}

namespace {

// Polls `t` until complete or `timeout_us` passed; false on timeout (the transfers stay posted:
// the caller is about to end the process or skip what it waited for).
bool WaitWithin(Comm& c, std::vector<Transfer>* t, int64_t timeout_us) {
  const int64_t start = NowMicros();
  while (!c.TestAll(static_cast<int>(t->size()), t->data())) {
    if (NowMicros() - start >= timeout_us) return false;
    c.Nap(1000);
  }
  return true;
}

}  // namespace

// Everyone tells rank 0, which answers everyone once all have: 2(n-1) messages.
std::string Transport::BarrierWithin(int64_t timeout_us) {
  static const uint8_t token = 1;
  // Receives given up on may still land later: the flags outlive the call. One set per thread,
  // since ranks as threads (inproc) each run their own barrier.
  static thread_local std::vector<uint8_t> got;
  got.assign(size, 0);
  std::vector<Transfer> t;
  try {
    if (rank == 0) {
      for (int q = 1; q < size; ++q) t.push_back(comm_->Irecv(&got[q], 1, q, kTagBarrier));
      if (!WaitWithin(*comm_, &t, timeout_us))
        return "not every rank reached the barrier within " + std::to_string(timeout_us / 1000) +
               " ms";
      for (int q = 1; q < size; ++q) t.push_back(comm_->Isend(&token, 1, q, kTagBarrier));
      return WaitWithin(*comm_, &t, timeout_us) ? "" : "the barrier's release did not go out";
    }
    t.push_back(comm_->Isend(&token, 1, 0, kTagBarrier));
    t.push_back(comm_->Irecv(&got[0], 1, 0, kTagBarrier));
  } catch (const TransportError& e) { return std::string("the barrier failed: ") + e.what(); }
  try {
    return WaitWithin(*comm_, &t, timeout_us) ? ""
                                              : "not every rank reached the barrier within " +
                                                    std::to_string(timeout_us / 1000) + " ms";
  } catch (const TransportError& e) { return std::string("the barrier failed: ") + e.what(); }
}

std::string Transport::GatherRecordsToRoot(const void* record, size_t bytes, int64_t timeout_us,
                                           std::vector<char>* all) {
  all->clear();
  // Given up on, transfers may still complete later: their buffers live as long as the thread
  // (one per thread: ranks as threads, inproc, each gather their own).
  static thread_local std::vector<char> recv;
  static thread_local std::vector<char> send;
  send.assign(static_cast<const char*>(record), static_cast<const char*>(record) + bytes);
  std::vector<Transfer> t;
  try {
    if (rank != 0) {
      t.push_back(comm_->Isend(send.data(), bytes, 0, kTagSummary));
      return WaitWithin(*comm_, &t, timeout_us) ? ""
                                                : "rank 0 did not take the record within " +
                                                      std::to_string(timeout_us / 1000000) + " s";
    }
    recv.assign(bytes * size, 0);
    std::memcpy(recv.data(), record, bytes);
    for (int q = 1; q < size; ++q)
      t.push_back(comm_->Irecv(&recv[q * bytes], bytes, q, kTagSummary));
    if (!WaitWithin(*comm_, &t, timeout_us))
      return "not every rank answered within " + std::to_string(timeout_us / 1000000) + " s";
  } catch (const TransportError& e) { return std::string("the gather failed: ") + e.what(); }
  *all = recv;
  return "";
}

void Transport::TopologyFromHostKeys(const std::string& host_key) {
  // Hosts are numbered by their lowest rank; with ranks_per_host, by consecutive global ranks.
  std::vector<std::string> keys = AllgatherStrings(
      ranks_per_host > 0 ? "rank-group-" + std::to_string(WorldRank(rank) / ranks_per_host)
                         : host_key);
  std::map<std::string, int> host_index;
  host_of.assign(size, 0);
  local_rank_of.assign(size, 0);
  std::vector<int> count_on_host;
  for (int r = 0; r < size; ++r) {
    auto it = host_index.find(keys[r]);
    if (it == host_index.end()) {
      it = host_index.emplace(keys[r], static_cast<int>(count_on_host.size())).first;
      count_on_host.push_back(0);
    }
    host_of[r] = it->second;
    local_rank_of[r] = count_on_host[it->second]++;
  }
  num_hosts = static_cast<int>(count_on_host.size());
  local_rank = local_rank_of[rank];
  local_size = count_on_host[host_of[rank]];
  min_local_size = *std::min_element(count_on_host.begin(), count_on_host.end());
  max_local_size = *std::max_element(count_on_host.begin(), count_on_host.end());
  homogeneous = min_local_size == max_local_size;
  std::vector<int> local_members;
  cross_members.clear();
  for (int r = 0; r < size; ++r) {
    if (host_of[r] == host_of[rank]) local_members.push_back(r);
    if (local_rank_of[r] == local_rank) cross_members.push_back(r);
  }
  cross_rank = static_cast<int>(std::find(cross_members.begin(), cross_members.end(), rank) -
                                cross_members.begin());
  cross_size = static_cast<int>(cross_members.size());
  local_ = SubComm(local_members, 1);
  cross_ = SubComm(cross_members, 2);
  // The machine: ranks of one kernel boot count together even across containers.
  std::vector<std::string> machines = AllgatherStrings(MachineId());
  ranks_on_machine = static_cast<int>(std::count(machines.begin(), machines.end(), machines[rank]));
}

}  // namespace hvd
