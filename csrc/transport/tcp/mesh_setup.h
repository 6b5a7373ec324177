// The full mesh of a TCP job: after the rendezvous, every rank connects to each lower rank and
// accepts a connection from each higher one, on the data listener it advertised.
//
// Handshake on each connection (fixed-size, little-endian):
//   acceptor  -> connector  {magic "HVDM", version, nonce[32]}                       40 bytes
//   connector -> acceptor   {magic, version, job id u64, rank i32, proof[32]}        52 bytes
//   acceptor  -> connector  {magic, acceptor's rank i32}                              8 bytes
// proof = HMAC-SHA256(secret, nonce || rank) with a secret; without one it is zeros, and the
// magic and the job id (from the rendezvous) are all that tell a peer from a stray. A connection
// that fails the handshake (wrong magic, garbage, wrong job or proof, unknown or repeated rank,
// silence for 3 s) is logged and closed; the listener keeps accepting until every expected peer
// has arrived, then closes. Cost: size - 1 connections per rank, formed concurrently (one
// poll() loop), three small messages each.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"
#include "transport/tcp/rendezvous.h"
#include "transport/tcp/tcp_comm.h"

namespace hvd {

// Connects `mesh` (rank, size) to every peer of `table`; `listener` is this rank's data
// listener, closed on return. Fails if a peer cannot be reached or `timeout_us` passes.
Status BuildMesh(const RendezvousResult& table, const std::string& secret, UniqueFd listener,
                 int64_t timeout_us, TcpMesh* mesh);

}  // namespace hvd
