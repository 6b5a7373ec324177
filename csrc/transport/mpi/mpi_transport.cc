#include "transport/mpi/mpi_transport.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/logging.h"
#include "common/reduce_kernels.h"
#include "common/watch_progress.h"

namespace hvd {

void MpiFatal(const char* call, int rc, const char* file, int line) {
  char err[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, err, &len);
  std::fprintf(stderr, "[horovod] FATAL: %s failed at %s:%d: %.*s\n", call, file, line, len, err);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

MPI_Datatype MpiDataType(DataType t) {
  switch (t) {
    case DataType::UINT8:
    case DataType::BOOL: return MPI_UINT8_T;  // bool is only moved, as bytes
    case DataType::INT8: return MPI_INT8_T;
    case DataType::UINT16: return MPI_UINT16_T;
    case DataType::INT16: return MPI_INT16_T;
    case DataType::INT32: return MPI_INT32_T;
    case DataType::INT64: return MPI_INT64_T;
    case DataType::FLOAT16:
    case DataType::BFLOAT16: return MPI_UINT16_T;
    case DataType::FLOAT32: return MPI_FLOAT;
    case DataType::FLOAT64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

namespace {

// One user-defined MPI_Op per (half type, reduce op): MPI's callback does not say which 16-bit
// format the buffer holds, so the template parameters carry it.
template <DataType D, ReduceOp O>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, static_cast<size_t>(*len), D, O);
}

MPI_Op g_half_ops[2][5];
bool g_half_ops_created = false;

template <DataType D>
void CreateHalfOps(MPI_Op* ops) {
  MPI_Op_create(&HalfReduce<D, ReduceOp::SUM>, 1, &ops[0]);
  ops[1] = ops[0];  // AVERAGE = SUM + postscale
  MPI_Op_create(&HalfReduce<D, ReduceOp::MIN>, 1, &ops[2]);
  MPI_Op_create(&HalfReduce<D, ReduceOp::MAX>, 1, &ops[3]);
  MPI_Op_create(&HalfReduce<D, ReduceOp::PRODUCT>, 1, &ops[4]);
}

void SleepMicros(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

}  // namespace

MPI_Op MpiReduceOp(DataType t, ReduceOp op) {
  // Adasum is no MPI_Op: it runs its own schedule (ops/adasum.cc) and never comes here.
  if (op == ReduceOp::ADASUM) return MPI_OP_NULL;
  if (t == DataType::FLOAT16 || t == DataType::BFLOAT16) {
    return g_half_ops[t == DataType::BFLOAT16][static_cast<int>(op)];
  }
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVERAGE: return MPI_SUM;
    case ReduceOp::MIN: return MPI_MIN;
    case ReduceOp::MAX: return MPI_MAX;
    case ReduceOp::PRODUCT: return MPI_PROD;
    case ReduceOp::ADASUM: break;
  }
  return MPI_SUM;
}

std::string MpiLibraryVersion() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, len);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

void MpiTransport::DeriveTopology() {
  if (ranks_per_host > 0)
    HVD_MPI_CHECK(MPI_Comm_split(mpi_comm_, WorldRank(rank) / ranks_per_host, rank, &local_comm_));
  else
    HVD_MPI_CHECK(
        MPI_Comm_split_type(mpi_comm_, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local_comm_));
  MPI_Comm_rank(local_comm_, &local_rank);
  MPI_Comm_size(local_comm_, &local_size);
  HVD_MPI_CHECK(MPI_Comm_split(mpi_comm_, local_rank, rank, &cross_comm_));
  MPI_Comm_rank(cross_comm_, &cross_rank);
  MPI_Comm_size(cross_comm_, &cross_size);
  int min_local = local_size, max_local = local_size;
  MPI_Allreduce(MPI_IN_PLACE, &min_local, 1, MPI_INT, MPI_MIN, mpi_comm_);
  MPI_Allreduce(MPI_IN_PLACE, &max_local, 1, MPI_INT, MPI_MAX, mpi_comm_);
  homogeneous = min_local == max_local;
  min_local_size = min_local;
  max_local_size = max_local;
  // Who is where, for the hierarchical allgather's pieces: every rank's host leader (its
  // host's lowest rank) and local rank.
  int leader = rank;
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local_comm_);
  std::vector<int> mine = {leader, local_rank}, all(2 * static_cast<size_t>(size));
  HVD_MPI_CHECK(MPI_Allgather(mine.data(), 2, MPI_INT, all.data(), 2, MPI_INT, mpi_comm_));
  host_of.assign(size, 0);
  local_rank_of.assign(size, 0);
  std::vector<int> leader_index(size, -1);
  num_hosts = 0;
  for (int r = 0; r < size; ++r) {  // a leader precedes its host's other ranks
    const int l = all[2 * r];
    if (leader_index[l] < 0) leader_index[l] = num_hosts++;
    host_of[r] = leader_index[l];
    local_rank_of[r] = all[2 * r + 1];
  }
  auto members = [this](MPI_Comm sub) {  // sub's ranks as ranks of mpi_comm_
    MPI_Group g, parent;
    int n;
    MPI_Comm_size(sub, &n);
    MPI_Comm_group(sub, &g);
    MPI_Comm_group(mpi_comm_, &parent);
    std::vector<int> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = i;
    MPI_Group_translate_ranks(g, n, in.data(), parent, out.data());
    MPI_Group_free(&g);
    MPI_Group_free(&parent);
    return out;
  };
  cross_members = members(cross_comm_);
  // The machine, as an FNV-1a hash of its id, per rank.
  const std::string machine = MachineId();
  uint64_t id = 1469598103934665603ULL;
  for (unsigned char c : machine) id = (id ^ c) * 1099511628211ULL;
  std::vector<uint64_t> ids(static_cast<size_t>(size));
  HVD_MPI_CHECK(MPI_Allgather(&id, 1, MPI_UINT64_T, ids.data(), 1, MPI_UINT64_T, mpi_comm_));
  ranks_on_machine = static_cast<int>(std::count(ids.begin(), ids.end(), id));
}

Status MpiTransport::Init(MPI_Comm comm, bool threads_disable) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return Status::Internal("MPI was already finalized; Horovod cannot start");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    int required = threads_disable ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
    if (MPI_Init_thread(nullptr, nullptr, required, &provided) != MPI_SUCCESS)
      return Status::Internal("MPI_Init_thread failed");
    we_initialized_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  threads_multiple = provided >= MPI_THREAD_MULTIPLE;
  HVD_MPI_CHECK(MPI_Comm_dup(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, &mpi_comm_));
  HVD_MPI_CHECK(MPI_Comm_dup(mpi_comm_, &raw_comm_));
  MPI_Comm_rank(mpi_comm_, &rank);
  MPI_Comm_size(mpi_comm_, &size);
  SetLogRank(rank);  // every line from here on says which rank wrote it
  if (provided < MPI_THREAD_SERIALIZED) {
    // The background thread calls MPI while the main thread runs user code.
    HVD_LOG(WARNING, "MPI provides thread level "
                         << provided
                         << " (< MPI_THREAD_SERIALIZED); do not call MPI from other threads");
  }
  DeriveTopology();
  MakeComms();
  if (threads_multiple) {
    HVD_MPI_CHECK(MPI_Comm_dup(mpi_comm_, &diag_comm_));
    MPI_Comm_set_errhandler(diag_comm_, MPI_ERRORS_RETURN);  // a dead peer must not abort us
  }
  if (!g_half_ops_created) {
    CreateHalfOps<DataType::FLOAT16>(g_half_ops[0]);
    CreateHalfOps<DataType::BFLOAT16>(g_half_ops[1]);
    g_half_ops_created = true;
  }
  return Status();
}

Status MpiTransport::InitSubset(MPI_Comm comm, std::vector<int> world) {
  mpi_comm_ = comm;
  world_ranks = std::move(world);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  threads_multiple = provided >= MPI_THREAD_MULTIPLE;
  HVD_MPI_CHECK(MPI_Comm_dup(mpi_comm_, &raw_comm_));
  MPI_Comm_rank(mpi_comm_, &rank);
  MPI_Comm_size(mpi_comm_, &size);
  DeriveTopology();
  MakeComms();
  return Status();
}

void MpiTransport::MakeComms() {
  comm_ = std::make_unique<MpiComm>(mpi_comm_, threads_multiple);
  local_ = std::make_unique<MpiComm>(local_comm_, threads_multiple);
  cross_ = std::make_unique<MpiComm>(cross_comm_, threads_multiple);
  raw_ = std::make_unique<MpiComm>(raw_comm_, threads_multiple);
}

MpiTransport::~MpiTransport() = default;

Status MpiTransport::Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) {
  MPI_Group parent_group, group;
  HVD_MPI_CHECK(MPI_Comm_group(mpi_comm_, &parent_group));
  HVD_MPI_CHECK(MPI_Group_incl(parent_group, static_cast<int>(ranks.size()), ranks.data(), &group));
  MPI_Comm comm = MPI_COMM_NULL;
  // Collective over every rank of this communicator; members get the new one.
  HVD_MPI_CHECK(MPI_Comm_create(mpi_comm_, group, &comm));
  MPI_Group_free(&group);
  MPI_Group_free(&parent_group);
  out->reset();
  if (comm == MPI_COMM_NULL) return Status();
  auto t = std::make_unique<MpiTransport>();
  t->ranks_per_host = ranks_per_host;
  Status s = t->InitSubset(comm, WorldRanks(ranks));
  if (s.ok()) *out = std::move(t);
  return s;
}

std::unique_ptr<Comm> MpiTransport::SubComm(const std::vector<int>& members, int purpose) {
  MPI_Group parent_group, group;
  HVD_MPI_CHECK(MPI_Comm_group(mpi_comm_, &parent_group));
  HVD_MPI_CHECK(
      MPI_Group_incl(parent_group, static_cast<int>(members.size()), members.data(), &group));
  MPI_Comm comm = MPI_COMM_NULL;
  HVD_MPI_CHECK(MPI_Comm_create_group(mpi_comm_, group, purpose, &comm));
  MPI_Group_free(&group);
  MPI_Group_free(&parent_group);
  sub_comms_.push_back(comm);
  return std::make_unique<MpiComm>(comm, threads_multiple);
}

void MpiTransport::Abort(const std::string& why) {
  HVD_LOG(ERROR, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void MpiTransport::Finalize() {
  if (finalized_) return;
  finalized_ = true;
  comm_.reset();
  local_.reset();
  cross_.reset();
  raw_.reset();
  for (MPI_Comm& c : sub_comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  sub_comms_.clear();
  for (auto& n : notes_out_)
    if (n.req != MPI_REQUEST_NULL) MPI_Request_free(&n.req);  // their buffers outlive MPI
  for (MPI_Comm* c :
       {&summary_comm_, &diag_comm_, &cross_comm_, &local_comm_, &raw_comm_, &mpi_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (we_initialized_ && !finalized) MPI_Finalize();
  we_initialized_ = false;
  notes_out_.clear();
}

namespace {

// The round message's tag (ExchangeRound); distinct from every collective's in ops/.
constexpr int kRoundTag = 500;

// Waits for `reqs` as the controller's rounds do: spins a while if this rank has work waiting
// (peers usually arrive within microseconds in steady state), then polls with naps of up to
// 200 us so that an early rank leaves the core to the training computation.
void WaitPolling(std::vector<MPI_Request>* reqs, std::vector<MPI_Status>* statuses, bool has_work) {
  PollUntil(
      [&] {
        int done = 0;
        HVD_MPI_CHECK(MPI_Testall(static_cast<int>(reqs->size()), reqs->data(), &done,
                                  statuses ? statuses->data() : MPI_STATUSES_IGNORE));
        return done != 0;
      },
      has_work ? 500 : 0, 200);
}

}  // namespace

void MpiTransport::BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work) {
  std::vector<MPI_Request> req(1);
  HVD_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, bits->data(), static_cast<int>(bits->size()),
                               MPI_UINT64_T, MPI_BAND, mpi_comm_, &req[0]));
  WaitPolling(&req, nullptr, has_work);
}

void MpiTransport::ExchangeRound(const std::vector<char>& mine, size_t capacity,
                                 std::vector<std::vector<char>>* all, std::vector<size_t>* lens,
                                 bool has_work) {
  all->resize(size);
  lens->assign(size, 0);
  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * (size - 1));
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    if ((*all)[q].size() < capacity) (*all)[q].resize(capacity);
    reqs.emplace_back();
    HVD_MPI_CHECK(MPI_Irecv((*all)[q].data(), static_cast<int>(capacity), MPI_BYTE, q, kRoundTag,
                            mpi_comm_, &reqs.back()));
  }
  const int receives = static_cast<int>(reqs.size());
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    reqs.emplace_back();
    HVD_MPI_CHECK(MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, q, kRoundTag,
                            mpi_comm_, &reqs.back()));
  }
  std::vector<MPI_Status> statuses(reqs.size());
  WaitPolling(&reqs, &statuses, has_work);
  for (int q = 0, i = 0; q < size && i < receives; ++q) {
    if (q == rank) continue;
    int count = 0;
    HVD_MPI_CHECK(MPI_Get_count(&statuses[i++], MPI_BYTE, &count));
    (*lens)[q] = static_cast<size_t>(count);
  }
}

void MpiTransport::BitOrAllreduce(std::vector<uint64_t>* bits) {
  HVD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bits->data(), static_cast<int>(bits->size()),
                              MPI_UINT64_T, MPI_BOR, mpi_comm_));
}

std::vector<std::string> MpiTransport::GatherToRoot(const std::string& blob) {
  int len = static_cast<int>(blob.size());
  std::vector<int> lens(rank == 0 ? size : 0), displs;
  HVD_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, mpi_comm_));
  std::string all;
  if (rank == 0) {
    displs.resize(size);
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[r] = total;
      total += lens[r];
    }
    all.resize(total);
  }
  HVD_MPI_CHECK(MPI_Gatherv(blob.data(), len, MPI_BYTE, &all[0], lens.data(), displs.data(),
                            MPI_BYTE, 0, mpi_comm_));
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.emplace_back(all.substr(displs[r], lens[r]));
  return out;
}

std::vector<std::string> MpiTransport::AllgatherStrings(const std::string& blob) {
  int len = static_cast<int>(blob.size());
  std::vector<int> lens(size), displs(size);
  HVD_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, mpi_comm_));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = total;
    total += lens[r];
  }
  std::string all(total, '\0');
  HVD_MPI_CHECK(MPI_Allgatherv(blob.data(), len, MPI_BYTE, &all[0], lens.data(), displs.data(),
                               MPI_BYTE, mpi_comm_));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(all.substr(displs[r], lens[r]));
  return out;
}

constexpr int kRollCallTag = 900;

void MpiTransport::SendNote(int to, int64_t word) {
  if (diag_comm_ == MPI_COMM_NULL) return;
  // Eight bytes go eagerly, so sends complete at once: reaping them here keeps the list short
  // however long the job (a send to a dead peer may stay pending; Finalize frees it).
  notes_out_.erase(
      std::remove_if(notes_out_.begin(), notes_out_.end(),
                     [](NoteSend& n) {
                       int done = 0;
                       return MPI_Test(&n.req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done;
                     }),
      notes_out_.end());
  for (int r = 0; r < size; ++r) {
    if (r == rank || (to >= 0 && r != to)) continue;
    notes_out_.push_back({std::make_unique<int64_t>(word), MPI_REQUEST_NULL});
    NoteSend& n = notes_out_.back();
    if (MPI_Isend(n.word.get(), 1, MPI_INT64_T, r, kRollCallTag, diag_comm_, &n.req) != MPI_SUCCESS)
      notes_out_.pop_back();
  }
}

void MpiTransport::PollNotes(std::vector<std::pair<int, int64_t>>* notes) {
  if (diag_comm_ == MPI_COMM_NULL) return;
  while (true) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, diag_comm_, &flag, &st) != MPI_SUCCESS || !flag)
      return;
    int64_t word = -1;
    if (MPI_Recv(&word, 1, MPI_INT64_T, st.MPI_SOURCE, kRollCallTag, diag_comm_,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return;
    notes->emplace_back(st.MPI_SOURCE, word);
  }
}

std::string MpiTransport::BarrierWithin(int64_t timeout_us) {
  MPI_Request req;
  if (MPI_Ibarrier(mpi_comm_, &req) != MPI_SUCCESS) return "the barrier could not start";
  const int64_t start = NowMicros();
  int done = 0;
  while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    // Given up on, the request stays pending: the caller is about to end the process.
    if (NowMicros() - start >= timeout_us)
      return "not every rank reached the barrier within " + std::to_string(timeout_us / 1000) +
             " ms";
    SleepMicros(1000);
  }
  return done ? "" : "the barrier failed";
}

void MpiTransport::CreateSummaryComm() {
  if (summary_comm_ != MPI_COMM_NULL) return;
  HVD_MPI_CHECK(MPI_Comm_dup(mpi_comm_, &summary_comm_));
  // At shutdown a peer may be exiting: an error then skips the summary instead of aborting.
  MPI_Comm_set_errhandler(summary_comm_, MPI_ERRORS_RETURN);
}

std::string MpiTransport::GatherRecordsToRoot(const void* record, size_t bytes, int64_t timeout_us,
                                              std::vector<char>* all) {
  all->clear();
  if (summary_comm_ == MPI_COMM_NULL) return "no summary communicator";
  summary_send_.assign(static_cast<const char*>(record), static_cast<const char*>(record) + bytes);
  summary_recv_.assign(rank == 0 ? bytes * size : 0, 0);
  MPI_Request req;
  int rc =
      MPI_Igather(summary_send_.data(), static_cast<int>(bytes), MPI_BYTE, summary_recv_.data(),
                  static_cast<int>(bytes), MPI_BYTE, 0, summary_comm_, &req);
  const int64_t start = NowMicros();
  int done = 0;
  while (rc == MPI_SUCCESS) {
    rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) break;
    // Given up on, the request stays pending (freeing or cancelling a nonblocking collective
    // is erroneous); its buffers stay alive in this object.
    if (NowMicros() - start >= timeout_us)
      return "not every rank answered within " + std::to_string(timeout_us / 1000000) + " s";
    SleepMicros(1000);  // ranks leave the final round together: this is rarely reached
  }
  if (rc != MPI_SUCCESS) {
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, err, &len);
    return "the gather failed: " + std::string(err, len);
  }
  all->swap(summary_recv_);
  return "";
}

std::string MpiTransport::ProcessorName() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (MPI_Get_processor_name(name, &len) != MPI_SUCCESS) return "?";
  return std::string(name, len);
}

void MpiTransport::BroadcastFromRoot(std::string* blob) {
  uint64_t len = blob->size();
  HVD_MPI_CHECK(MPI_Bcast(&len, 1, MPI_UINT64_T, 0, mpi_comm_));
  blob->resize(len);
  HVD_MPI_CHECK(MPI_Bcast(&(*blob)[0], static_cast<int>(len), MPI_BYTE, 0, mpi_comm_));
}

bool MpiLauncherPresent() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

MpiComm::MpiComm(MPI_Comm comm, bool threads_multiple)
    : comm_(comm), threads_multiple_(threads_multiple) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
}

namespace {

static_assert(sizeof(MPI_Request) == sizeof(void*), "a Transfer's handle holds an MPI_Request");

MPI_Request* Requests(Transfer* t) { return reinterpret_cast<MPI_Request*>(t); }

Transfer FromRequest(MPI_Request r) {
  Transfer t;
  std::memcpy(&t.handle, &r, sizeof(r));
  return t;
}

// A default Transfer (null handle) is MPI_REQUEST_NULL to MPI, and back after the test.
void ToMpi(int n, Transfer* t) {
  for (int i = 0; i < n; ++i)
    if (!t[i].handle) Requests(t)[i] = MPI_REQUEST_NULL;
}
void FromMpi(int n, Transfer* t) {
  for (int i = 0; i < n; ++i)
    if (Requests(t)[i] == MPI_REQUEST_NULL) t[i].handle = nullptr;
}

}  // namespace

Transfer MpiComm::Isend(const void* data, size_t bytes, int peer, int tag) {
  MPI_Request r;
  HVD_MPI_CHECK(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r));
  return FromRequest(r);
}

Transfer MpiComm::Irecv(void* data, size_t bytes, int peer, int tag) {
  MPI_Request r;
  HVD_MPI_CHECK(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r));
  return FromRequest(r);
}

bool MpiComm::TestAll(int n, Transfer* t) {
  ToMpi(n, t);
  int done = 0;
  HVD_MPI_CHECK(MPI_Testall(n, Requests(t), &done, MPI_STATUSES_IGNORE));
  FromMpi(n, t);
  return done != 0;
}

int MpiComm::TestAny(int n, Transfer* t, bool* all_idle) {
  ToMpi(n, t);
  int index = MPI_UNDEFINED, done = 0;
  HVD_MPI_CHECK(MPI_Testany(n, Requests(t), &index, &done, MPI_STATUS_IGNORE));
  FromMpi(n, t);
  *all_idle = done && index == MPI_UNDEFINED;
  return done && index != MPI_UNDEFINED ? index : -1;
}

void MpiComm::Bcast(void* data, size_t bytes, int root) {
  HVD_MPI_CHECK(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_));
}

void MpiComm::Allgather(const void* mine, size_t bytes, void* all) {
  HVD_MPI_CHECK(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                              MPI_BYTE, comm_));
}

void MpiComm::AlltoallInt64(const int64_t* send, int64_t* recv) {
  HVD_MPI_CHECK(MPI_Alltoall(send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, comm_));
}

bool MpiComm::NativeAllreduce(const void* src, void* dst, size_t count, DataType dtype,
                              ReduceOp op) {
  const size_t piece = INT_MAX / 2;  // MPI counts are int
  const size_t esize = DataTypeSize(dtype);
  for (size_t done = 0; done < count; done += piece) {
    int n = static_cast<int>(std::min(piece, count - done));
    char* d = static_cast<char*>(dst) + done * esize;
    const void* s = src == dst ? MPI_IN_PLACE : static_cast<const char*>(src) + done * esize;
    HVD_MPI_CHECK(MPI_Allreduce(s, d, n, MpiDataType(dtype), MpiReduceOp(dtype, op), comm_));
    WatchProgress();
  }
  return true;
}

}  // namespace hvd
