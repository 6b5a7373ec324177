// How frontends build wire requests (engine.h: OpArgs, MemberName, MakeRequest): member names,
// group fields only for grouped ops, every argument copied, the frontend's reason carried.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"

namespace hvd {
namespace {

TEST(MemberName, LoneUngroupedTensorTakesTheOpsName) {
  EXPECT_EQ(MemberName("grad/w", 0, 1, false), "grad/w");
}

TEST(MemberName, GroupMembersAndSeveralTensorsAreIndexed) {
  EXPECT_EQ(MemberName("grads", 0, 1, true), "grads.0");  // a group of one is still a group
  EXPECT_EQ(MemberName("grads", 2, 3, true), "grads.2");
  EXPECT_EQ(MemberName("pair", 1, 2, false), "pair.1");
}

TEST(MemberName, ExplicitNamesAreUsedAsGiven) {
  OpArgs op;
  op.name = "ignored";
  op.names = {"a", "a"};
  EXPECT_EQ(MemberName(op, 1, 2), "a");
  op.names.clear();
  op.grouped = true;
  EXPECT_EQ(MemberName(op, 1, 2), "ignored.1");
}

OpArgs SomeArgs() {
  OpArgs op;
  op.type = OpType::ALLTOALL;
  op.name = "x";
  op.reduce_op = ReduceOp::MAX;
  op.root = 2;
  op.prescale = 0.5;
  op.postscale = 4.0;
  op.splits = {3, 1};
  op.invalid = "bad splits";
  op.gpu = true;
  return op;
}

TEST(MakeRequest, CopiesEveryArgumentAndTheTensor) {
  const Request r = MakeRequest(SomeArgs(), 0, 1, DataType::INT16, {4, 5});
  EXPECT_EQ(r.type, OpType::ALLTOALL);
  EXPECT_EQ(r.name, "x");
  EXPECT_EQ(r.rank, GetTopology().rank);
  EXPECT_EQ(r.reduce_op, ReduceOp::MAX);
  EXPECT_EQ(r.root, 2);
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.postscale, 4.0);
  EXPECT_EQ(r.splits, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(r.invalid, "bad splits");
  EXPECT_TRUE(r.gpu);
  EXPECT_EQ(r.dtype, DataType::INT16);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 5}));
  EXPECT_TRUE(r.group.empty());
  EXPECT_EQ(r.group_size, 0);
}

TEST(MakeRequest, GroupFieldsOnlyForGroupedOps) {
  OpArgs op = SomeArgs();
  const Request several = MakeRequest(op, 1, 3, DataType::FLOAT32, {});
  EXPECT_EQ(several.name, "x.1");
  EXPECT_TRUE(several.group.empty());
  EXPECT_EQ(several.group_size, 0);
  op.grouped = true;
  const Request member = MakeRequest(op, 1, 3, DataType::FLOAT32, {});
  EXPECT_EQ(member.name, "x.1");
  EXPECT_EQ(member.group, "x");
  EXPECT_EQ(member.group_size, 3);
  // Explicit names keep the group: the op's name.
  op.names = {"x.0", "other", "x.2"};
  const Request named = MakeRequest(op, 1, 3, DataType::FLOAT32, {});
  EXPECT_EQ(named.name, "other");
  EXPECT_EQ(named.group, "x");
  EXPECT_EQ(named.group_size, 3);
}

TEST(MakeRequest, DefaultsAreAPlainUsableRequest) {
  const Request r = MakeRequest(OpArgs{}, 0, 1, DataType::FLOAT32, {2});
  EXPECT_EQ(r.type, OpType::ALLREDUCE);
  EXPECT_EQ(r.reduce_op, ReduceOp::SUM);
  EXPECT_TRUE(r.invalid.empty());
  EXPECT_FALSE(r.gpu);
  EXPECT_TRUE(r.splits.empty());
}

TEST(SupportedDataTypes, ListsEveryDtypeBoolLast) {
  EXPECT_EQ(SupportedDataTypes(),
            "uint8, int8, uint16, int16, int32, int64, float16, bfloat16, float32 or float64 "
            "(or bool, for allgather, broadcast and alltoall)");
}

}  // namespace
}  // namespace hvd
