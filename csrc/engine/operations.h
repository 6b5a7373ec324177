// Runs negotiated responses on the background thread: packs fused tensors into the persistent
// fusion buffer, applies scale factors, calls the collective, and completes each entry.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/message.h"
#include "engine/gpu_context.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "engine/watchdog.h"
#include "ops/cpu_collectives.h"
#include "transport/transport.h"

namespace hvd {

// Set when the network failed under the engine (a TransportError: a peer died, TCP), before
// any op completes with the error, so that an init() the error prompts finds the engine ending
// (its background thread stops after it) and re-forms; Init clears it.
std::atomic<bool>& TransportBroke();

class Operations {
 public:
  Operations(Transport* net, const Config& config, Timeline* timeline, TensorQueue* queue);
  ~Operations();
  // Runs the response and completes its entries with the returned status. `payload_bytes`:
  // this rank's bytes of all its tensors (for the job summary).
  Status Execute(const Response& response, int64_t* payload_bytes);

  // MPI: HOROVOD_CPU_OPERATIONS=mpi; DIRECT: one-step exchange up to
  // HOROVOD_SMALL_ALLREDUCE_BYTES; HIERARCHICAL: above that on several hosts
  // (HOROVOD_HIERARCHICAL_ALLREDUCE); RING: everything else; ADASUM: op=Adasum (ops/adasum.cc);
  // EAGER: the data came with the negotiation round (Response::eager_parts), reduced here.
  enum class AllreduceAlgorithm { MPI = 0, DIRECT, RING, ADASUM, HIERARCHICAL, EAGER };
  // How many responses each algorithm ran, and whether the hierarchical ones are used and why
  // (or why not), for the end-of-job summary.
  static constexpr int kAllreduceAlgorithms = 6;  // in AllreduceAlgorithm's order
  int64_t allreduce_runs[kAllreduceAlgorithms] = {};
  int64_t allgather_runs[2] = {};  // ring, hierarchical
  std::string hierarchy_note;

 private:
  // Execute's steps. A completed join: join()'s answer to this rank's entry.
  Status CompleteJoin(const Response& r);
  // A response that failed negotiation: its entries present here fail with its error.
  Status FailResponse(const Response& r);
  // Takes the response's entries off the queue into `entries`; a joined rank's missing
  // allreduce tensors become zeros (in `zeros`, which must outlive the collective). A missing
  // entry otherwise (a shutdown raced the response) completes those taken and fails.
  Status TakeEntries(const Response& r, std::vector<TensorEntry>* entries,
                     std::vector<std::vector<char>>* zeros);
  // The collective itself. A TransportError under it becomes the returned error, and its text
  // and peer go to *broken and *broken_peer, for Execute to throw again once the entries are done.
  Status RunCollective(const Response& r, std::vector<TensorEntry>& entries, std::string* broken,
                       int* broken_peer);

  Status Allreduce(const Response& r, std::vector<TensorEntry>& entries);
  // A fused ring or hierarchical allreduce over the tensors in place, the small ones packed.
  Status AllreduceTensorPieces(const Response& r, std::vector<TensorEntry>& entries,
                               AllreduceAlgorithm algo, const char* activity);
  Status AllreduceEager(const Response& r, std::vector<TensorEntry>& entries);
  Status AllreduceWidened(const Response& r, std::vector<TensorEntry>& entries);  // integer Average
  Status Allgather(const Response& r, TensorEntry& e);
  Status Broadcast(const Response& r, TensorEntry& e);
  Status Alltoall(const Response& r, TensorEntry& e);
  Status Reducescatter(const Response& r, TensorEntry& e);
  void Average(void* buf, size_t count, const Response& r);  // postscale and /n for Average
  AllreduceAlgorithm ChooseAllreduce(size_t count, DataType dtype) const;
  void AllreduceBuffer(const void* src, void* dst, size_t count, const Response& r,
                       AllreduceAlgorithm algo);
  void* FusionBuffer(size_t bytes);
  // What the watchdog reports if the op blocks: its name, tensor and the peers it waits on.
  WatchSection Watch(const Response& r, const char* what, bool ring) const;
  void Activity(const std::vector<TensorEntry>& es, const char* name);
  void EndActivity(const std::vector<TensorEntry>& es);

  // HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER resolved against the hosts (constructor).
  bool hierarchical_allreduce_ = false, hierarchical_allgather_ = false;
  HostLayout layout_;

  Transport* net_;
  Config config_;
  Timeline* timeline_;
  TensorQueue* queue_;
  RingScratch scratch_;
  void* fusion_ = nullptr;
  size_t fusion_size_ = 0;
  std::unique_ptr<GpuOperations> gpu_;  // made on the first GPU response
};

}  // namespace hvd
