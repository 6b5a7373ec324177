// Ranks as threads of this process, each with its own TcpTransport over 127.0.0.1, meeting at a
// rendezvous on a free port: what tcp_transport_test.cc (the data path) and tcp_setup_test.cc
// (the rendezvous, the handshake and their failures) share.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "common/common.h"
#include "transport/tcp/hmac_sha256.h"
#include "transport/tcp/rendezvous.h"
#include "transport/tcp/tcp_transport.h"

namespace hvd {
namespace tcp_test {

constexpr int64_t kSec = 1000000;

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

inline int CountEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

inline TcpOptions Opts(int rank, int size, int port, int64_t timeout_us = 20 * kSec) {
  TcpOptions o;
  o.rank = rank;
  o.size = size;
  o.rendezvous_addr = "127.0.0.1";
  o.rendezvous_port = port;
  o.host_rendezvous = rank == 0;
  o.hostname = "host" + std::to_string(rank);
  o.timeout_us = timeout_us;
  return o;
}

// Forms one transport per options entry, each on its own thread, then runs body(rank, t) on
// that thread (if every rank formed). Exceptions fail the test.
inline std::vector<Status> RunRanks(const std::vector<TcpOptions>& opts,
                                    const std::function<void(int, Transport&)>& body = nullptr) {
  const int n = static_cast<int>(opts.size());
  std::vector<Status> st(n);
  std::vector<std::unique_ptr<Transport>> ts(n);
  std::vector<std::thread> threads;
  std::atomic<int> formed{0}, checked{0};
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      st[i] = CreateTcpTransport(opts[i], &ts[i]);
      if (st[i].ok()) ++formed;
      ++checked;
      while (checked.load() < n) std::this_thread::yield();
      if (formed.load() == n && body) {
        try {
          body(opts[i].rank, *ts[i]);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << opts[i].rank << ": " << e.what();
        }
      }
      if (ts[i]) ts[i]->Finalize();
    });
  for (auto& t : threads) t.join();
  return st;
}

inline void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t i = 0; i < st.size(); ++i) EXPECT_TRUE(st[i].ok()) << i << ": " << st[i].message();
}

inline std::vector<char> Pattern(size_t bytes, int from, int to, int salt) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(i * 131 + from * 17 + to * 7 + salt);
  return v;
}

inline void Rounds(int rank, Transport& t) {
  const int n = t.size;
  std::vector<std::string> all = t.AllgatherStrings(std::string(rank * 3, 'a' + rank));
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], std::string(q * 3, 'a' + q));
  std::vector<std::string> g = t.GatherToRoot("blob" + std::to_string(rank));
  if (rank == 0) {
    for (int q = 0; q < n; ++q) EXPECT_EQ(g[q], "blob" + std::to_string(q));
  } else {
    EXPECT_TRUE(g.empty());
  }
  std::string b = rank == 0 ? std::string(100000, 'z') : "";
  t.BroadcastFromRoot(&b);
  EXPECT_EQ(b, std::string(100000, 'z'));
  std::vector<uint64_t> bits = {~0ull, ~0ull ^ (1ull << rank), 0xffull};
  t.BitAndAllreduce(&bits, rank % 2 == 0);
  uint64_t want = ~0ull;
  for (int q = 0; q < n; ++q) want &= ~(1ull << q);
  EXPECT_EQ(bits[0], ~0ull);
  EXPECT_EQ(bits[1], want);
  EXPECT_EQ(bits[2], 0xffull);
  std::vector<char> mine(rank * 10 + 1, static_cast<char>('0' + rank));
  std::vector<std::vector<char>> msgs;
  std::vector<size_t> lens;
  t.ExchangeRound(mine, 1000, &msgs, &lens, true);
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    ASSERT_EQ(lens[q], static_cast<size_t>(q * 10 + 1));
    EXPECT_EQ(msgs[q][0], '0' + q);
  }
  // Bcast of 3 MiB from the last rank (a pipelined chain of 1 MiB pieces).
  std::vector<char> big = rank == n - 1 ? Pattern(3 << 20, 9, 9, 9) : std::vector<char>(3 << 20);
  t.comm().Bcast(big.data(), big.size(), n - 1);
  EXPECT_EQ(big, Pattern(3 << 20, 9, 9, 9));
}

}  // namespace tcp_test
}  // namespace hvd
