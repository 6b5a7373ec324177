// Same-machine links of the TCP mesh over Unix domain sockets. Loopback TCP spends most of a
// transfer in the TCP stack (segments, ACKs, windows): two processes exchanging 64 MiB each way
// on a 2-core VM moved 0.3-0.6 GB/s per direction over loopback TCP and 1.0-1.6 GB/s over a
// Unix stream socket, blocking sockets both. The data path (tcp_comm.h) is the same over either:
// a stream socket, header and payload.
//
// After the mesh is built, every pair of ranks talks over its authenticated TCP connection:
//   each rank -> each peer   a frame {magic "HVDU", machine id (boot_id), name of this rank's
//                            abstract Unix listener ("" if it has none), token[32],
//                            probe word address u64 and value u64 (0 0: no single copy)}
// The token is fresh per peer; a rank told not to use Unix sockets offers no listener. A pair whose
// machine ids match and that both have a listener moves: the higher rank connects to the lower
// one's listener and writes the token the lower rank sent it (which proves, to the lower rank,
// which peer dialed: the token travelled only on that authenticated connection), then writes one
// byte on TCP: 1 if it connected, 0 if not (a container in another network namespace on the same
// machine cannot see the listener: the pair keeps TCP). The lower rank reads that byte and, on 1,
// accepts until the connection with that token arrives. Then both replace the TCP connection with
// the Unix one. Before they do, each rank of a moved pair tries to read the other's probe word
// (single_copy.h) and writes one byte on TCP, 1 if it could; a rank sends single-copy messages
// to the peers that answered 1. Nothing else is on either connection yet: the mesh carries no
// data until the job has formed.
#pragma once

#include <cstdint>

#include "common/common.h"
#include "transport/tcp/tcp_comm.h"

namespace hvd {

// Moves every same-machine link of `mesh` to a Unix socket where both ends can; collective over
// the mesh's ranks, every one of which calls it: one with `offer` false keeps all its links on
// TCP (it offers no listener); one with `single_copy` false neither reads its peers' memory nor
// offers its own (HOROVOD_TCP_SINGLE_COPY=0). *moved: how many of this rank's links moved;
// *single_copy_links: to how many of those peers it sends single-copy messages. An error means a
// link failed mid-setup (a peer died): the job cannot form.
Status MoveLocalLinksToUnixSockets(TcpMesh* mesh, bool offer, bool single_copy, int64_t timeout_us,
                                   int* moved, int* single_copy_links);

}  // namespace hvd
