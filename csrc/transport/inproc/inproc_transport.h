// The in-process transport: ranks are threads of one process that exchange messages through
// mailboxes in shared memory. It exists so that unit tests can run every collective of ops/ and
// the default control rounds of transport.cc on n "ranks" without MPI or sockets.
//
// Usage: one InprocWorld shared by the threads, then MakeInprocTransport(world, r) on the thread
// of rank r (collective: every rank's thread calls it, concurrently).
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"

namespace hvd {

class InprocWorld {
 public:
  // `ranks_per_host` > 0 makes every that many consecutive ranks one "host" (the topology of
  // Transport::ranks_per_host); 0: every rank on host "inproc".
  explicit InprocWorld(int size, int ranks_per_host = 0);
  ~InprocWorld();
  InprocWorld(const InprocWorld&) = delete;
  InprocWorld& operator=(const InprocWorld&) = delete;

  int size() const;
  int ranks_per_host() const;
  // Sends of at most this many bytes complete at once (copied into the receiver's mailbox when
  // no receive waits for them); larger ones complete only once their receive is posted, as a
  // rendezvous protocol does. Default: every send is eager. A test sets it low to check that an
  // algorithm does not rely on the transport buffering its sends. Set before the ranks start.
  void set_eager_limit(size_t bytes);
  size_t eager_limit() const;

  struct Impl;  // the mailboxes (inproc_transport.cc)
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Rank `rank`'s transport of `world` (comm(), local(), cross() and the topology filled in).
std::unique_ptr<Transport> MakeInprocTransport(std::shared_ptr<InprocWorld> world, int rank);

}  // namespace hvd
