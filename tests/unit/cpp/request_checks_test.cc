// Rank 0's checks of one tensor's requests (engine/request_checks.h), in process: the error
// texts that every rank raises name the tensor, what differs and the ranks as hvd.rank()
// numbers them (world ranks, also inside a process set); agreeing requests give the response
// every rank runs. The engine tests check the same texts end to end under mpirun.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/request_checks.h"
#include "transport/transport.h"

namespace hvd {
namespace {

// The checks read a set's size and world ranks only: a transport that carries nothing.
class Ranks : public Transport {
 public:
  explicit Ranks(int n, std::vector<int> world = {}) {
    size = n;
    world_ranks = std::move(world);
  }
  const char* Name() const override { return "none"; }
  Status Subset(const std::vector<int>&, std::unique_ptr<Transport>*) override { return Status(); }
  void Finalize() override {}
  [[noreturn]] void Abort(const std::string& why) override { std::abort(); }

 protected:
  std::unique_ptr<Comm> SubComm(const std::vector<int>&, int) override { return nullptr; }
};

Request Req(OpType type, std::vector<int64_t> shape, DataType dtype = DataType::FLOAT32) {
  Request r;
  r.type = type;
  r.name = "t";
  r.shape = std::move(shape);
  r.dtype = dtype;
  return r;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ResponseFromRequests, AgreeingAllreducesRun) {
  const std::vector<Request> reqs(3, Req(OpType::ALLREDUCE, {4, 2}));
  const Response r = ResponseFromRequests(Ranks(3), "grad", reqs, 0);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.names, (std::vector<std::string>{"grad"}));
  EXPECT_EQ(r.num_elements, (std::vector<int64_t>{8}));
}

TEST(ResponseFromRequests, ShapesThatDifferNameEachGroupOfRanks) {
  std::vector<Request> reqs(3, Req(OpType::ALLREDUCE, {4}));
  reqs[1].shape = {5};
  const Response r = ResponseFromRequests(Ranks(3), "grad", reqs, 0);
  EXPECT_TRUE(Has(r.error, "Mismatched shapes for tensor 'grad'")) << r.error;
  EXPECT_TRUE(Has(r.error, "ranks [0, 2] have shape [4]")) << r.error;
  EXPECT_TRUE(Has(r.error, "rank [1] has shape [5]")) << r.error;
  EXPECT_FALSE(r.error_is_invalid_argument);
}

// A rank that passed an empty list to a grouped op sends its marker (group size 0, engine.h
// EmptyGroupMarker): the others' group size and its 0 are named, so that no rank waits.
TEST(ResponseFromRequests, AnEmptyGroupOnOneRankNamesEachRanksGroupSize) {
  std::vector<Request> reqs(3, Req(OpType::ALLREDUCE, {4}));
  for (auto& r : reqs) {
    r.group = "g";
    r.group_size = 2;
  }
  reqs[2].shape = {0};
  reqs[2].dtype = DataType::UINT8;
  reqs[2].group_size = 0;
  EXPECT_TRUE(EmptyGroupMarker(reqs[2], 1));
  EXPECT_FALSE(EmptyGroupMarker(reqs[0], 1));
  const Response r = ResponseFromRequests(Ranks(3), "g.0", reqs, 0);
  EXPECT_TRUE(Has(r.error, "Mismatched group sizes for tensor 'g.0'")) << r.error;
  EXPECT_TRUE(Has(r.error, "ranks [0, 1] have 2 tensors in group 'g'")) << r.error;
  EXPECT_TRUE(Has(r.error, "rank [2] has 0 tensors in group 'g'")) << r.error;
}

TEST(ResponseFromRequests, RanksInAProcessSetAreNamedAsWorldRanks) {
  std::vector<Request> reqs(2, Req(OpType::ALLREDUCE, {4}));
  reqs[1].dtype = DataType::FLOAT64;
  const Response r = ResponseFromRequests(Ranks(2, {1, 3}), "x", reqs, 0);
  EXPECT_TRUE(Has(r.error, "Mismatched data types for tensor 'x'")) << r.error;
  EXPECT_TRUE(Has(r.error, "rank [1] has")) << r.error;
  EXPECT_TRUE(Has(r.error, "rank [3] has")) << r.error;
}

TEST(ResponseFromRequests, TheOperationIsComparedBeforeTheShape) {
  std::vector<Request> reqs(2, Req(OpType::ALLREDUCE, {4}));
  reqs[1] = Req(OpType::BROADCAST, {7});
  const Response r = ResponseFromRequests(Ranks(2), "x", reqs, 0);
  EXPECT_TRUE(Has(r.error, "Mismatched operations")) << r.error;
  EXPECT_FALSE(Has(r.error, "shape")) << r.error;
}

TEST(ResponseFromRequests, ARanksOwnBadArgumentsComeFirstAndAreInvalidArguments) {
  std::vector<Request> reqs(2, Req(OpType::BROADCAST, {4}));
  reqs[1].shape = {9};
  reqs[1].invalid = "broadcast root rank 5 is outside [0, 2)";
  const Response r = ResponseFromRequests(Ranks(2), "w", reqs, 0);
  EXPECT_TRUE(Has(r.error, "Invalid arguments for tensor 'w' on rank 1: broadcast root"))
      << r.error;
  EXPECT_TRUE(r.error_is_invalid_argument);
}

TEST(ResponseFromRequests, AllgatherKeepsEveryRanksFirstDimension) {
  std::vector<Request> reqs(3, Req(OpType::ALLGATHER, {2, 3}));
  reqs[2].shape = {0, 3};
  const Response r = ResponseFromRequests(Ranks(3), "g", reqs, 0);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.first_dims, (std::vector<int64_t>{2, 2, 0}));
}

TEST(ResponseFromRequests, AllgatherWhoseOutputWouldOverflowIsRefused) {
  std::vector<Request> reqs(2, Req(OpType::ALLGATHER, {int64_t(1) << 60, 1}));
  const Response r = ResponseFromRequests(Ranks(2), "g", reqs, 0);
  EXPECT_TRUE(Has(r.error, "more bytes than fit in int64")) << r.error;
  EXPECT_TRUE(Has(r.error, "rank 0 1152921504606846976, rank 1")) << r.error;
  EXPECT_TRUE(r.error_is_invalid_argument);
}

TEST(ResponseFromRequests, ABoolSumIsRefusedOnceForEveryRank) {
  const std::vector<Request> reqs(2, Req(OpType::ALLREDUCE, {4}, DataType::BOOL));
  const Response r = ResponseFromRequests(Ranks(2), "mask", reqs, 0);
  EXPECT_TRUE(Has(r.error, "tensor 'mask': ")) << r.error;
  EXPECT_TRUE(r.error_is_invalid_argument);
}

TEST(ResponseFromRequests, JoinAnswersTheLastRankToJoin) {
  const std::vector<Request> reqs(3, Req(OpType::JOIN, {}));
  EXPECT_EQ(ResponseFromRequests(Ranks(3, {2, 4, 6}), "join", reqs, 1).root, 4);
}

TEST(ResponseWithJoinedRanks, AnAllreduceRunsAmongTheOthers) {
  const std::vector<Request> reqs(3, Req(OpType::ALLREDUCE, {4}));
  const Response r = ResponseWithJoinedRanks(Ranks(3), "g", reqs, {true, false, true}, {1});
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.contributors, 2);
}

TEST(ResponseWithJoinedRanks, AnythingElseNamesTheJoinedRanks) {
  const std::vector<Request> reqs(3, Req(OpType::ALLGATHER, {4}));
  const Response r = ResponseWithJoinedRanks(Ranks(3), "g", reqs, {true, false, false}, {1, 2});
  EXPECT_TRUE(Has(r.error, "ALLGATHER cannot run while ranks [1, 2] have joined")) << r.error;
}

TEST(InvalidArguments, NamesWhatIsWrongWithThisRanksRequest) {
  EXPECT_EQ(InvalidArguments(Req(OpType::ALLREDUCE, {4}), 2), "");
  EXPECT_TRUE(Has(InvalidArguments(Req(OpType::ALLREDUCE, {-1}), 2), "negative dimension"));
  EXPECT_TRUE(Has(InvalidArguments(Req(OpType::ALLGATHER, {}), 2), "got a scalar"));
  Request b = Req(OpType::BROADCAST, {4});
  b.root = 2;
  EXPECT_EQ(InvalidArguments(b, 2), "broadcast root rank 2 is outside [0, 2)");
  Request a = Req(OpType::ALLTOALL, {4});
  a.splits = {3, 2};
  EXPECT_TRUE(Has(InvalidArguments(a, 2), "summing to the first dimension (4), got [3, 2]"));
}

}  // namespace
}  // namespace hvd
