// Which transport a process runs on, and the rendezvous service a launcher that is not a rank
// serves (engine.h's TransportChoice, Start/StopRendezvousServer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/common.h"
#include "common/config.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/transport.h"

namespace hvd {

// HOROVOD_TRANSPORT, or (auto) "mpi" for an adopted communicator or under an MPI launcher,
// "tcp" where torchrun's or upstream Gloo's variables say how to meet, else "mpi" (a process
// alone: MPI's singleton init).
std::string ChooseTransport(const Config& c, bool adopted_comm);
// Starts the chosen transport: *net on success, and *mpi = net when it is MPI (else null).
// `comm_handle`: an MPI communicator to adopt (0: MPI_COMM_WORLD).
Status StartTransport(const Config& c, uintptr_t comm_handle, std::unique_ptr<Transport>* net,
                      MpiTransport** mpi);

}  // namespace hvd
