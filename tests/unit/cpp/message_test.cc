// The negotiation messages: OpSpec comparison, RequestList/ResponseList encode/decode round
// trips with every field set, and truncated or garbled input refused (never a throw).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "common/message.h"

namespace hvd {
namespace {

OpSpec SomeSpec() {
  OpSpec s;
  s.type = OpType::REDUCESCATTER;
  s.dtype = DataType::BFLOAT16;
  s.reduce_op = ReduceOp::PRODUCT;
  s.root = 7;
  s.prescale = 0.25;
  s.postscale = -3.5;
  s.gpu = true;
  return s;
}

Request SomeRequest(const std::string& name) {
  Request r;
  r.spec() = SomeSpec();
  r.rank = 3;
  r.name = name;
  r.shape = {4, 0, 7};
  r.splits = {1, 2, 1};
  r.invalid = "bad root";
  r.group = "grads";
  r.group_size = 12;
  return r;
}

Response SomeResponse() {
  Response r;
  r.spec() = SomeSpec();
  r.names = {"a", std::string("b\0c", 3), ""};
  r.num_elements = {5, 0, std::numeric_limits<int64_t>::max()};
  r.first_dims = {2, -1};
  r.error = "Mismatched shapes for tensor 'a': ...";
  r.error_is_invalid_argument = true;
  return r;
}

void ExpectSameRequest(const Request& a, const Request& b) {
  EXPECT_TRUE(a.spec() == b.spec());
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.prescale, b.prescale);
  EXPECT_EQ(a.postscale, b.postscale);
  EXPECT_EQ(a.gpu, b.gpu);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.splits, b.splits);
  EXPECT_EQ(a.invalid, b.invalid);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.group_size, b.group_size);
}

TEST(OpSpec, EveryFieldTakesPartInEqualityAndOrder) {
  const OpSpec base = SomeSpec();
  std::vector<OpSpec> changed(7, base);
  changed[0].type = OpType::ALLREDUCE;
  changed[1].dtype = DataType::FLOAT32;
  changed[2].reduce_op = ReduceOp::SUM;
  changed[3].root = 0;
  changed[4].prescale = 1.0;
  changed[5].postscale = 1.0;
  changed[6].gpu = false;
  static_assert(std::tuple_size<decltype(OpSpec::Fields(std::declval<OpSpec&>()))>::value == 7,
                "a new OpSpec field needs a case here");
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_FALSE(changed[i] == base) << "field " << i;
    EXPECT_TRUE(changed[i] != base) << "field " << i;
    EXPECT_TRUE(changed[i] < base || base < changed[i]) << "field " << i;
  }
  EXPECT_TRUE(base == SomeSpec());
  EXPECT_FALSE(base < SomeSpec());
}

// Wire values cross process boundaries: a new dtype is appended, and every one has a name and
// a size. A new DataType needs its cases in the switches (the compiler's -Wswitch says where)
// and a line here.
TEST(DataType, EveryValueHasANameAndASizeAndNewOnesAreAppended) {
  static_assert(static_cast<int>(DataType::FLOAT64) == 7, "existing wire values never move");
  static_assert(static_cast<int>(DataType::BOOL) == 8, "bool is appended after float64");
  static_assert(static_cast<int>(DataType::UINT16) == 9 &&
                    static_cast<int>(DataType::INT16) == 10 && kNumDataTypes == 11,
                "uint16 and int16 are appended after bool");
  const char* names[] = {"uint8",   "int8",    "int32", "int64",  "float16", "bfloat16",
                         "float32", "float64", "bool",  "uint16", "int16"};
  const size_t sizes[] = {1, 1, 4, 8, 2, 2, 4, 8, 1, 2, 2};
  for (int i = 0; i < kNumDataTypes; ++i) {
    const DataType t = static_cast<DataType>(i);
    EXPECT_STREQ(DataTypeName(t), names[i]) << i;
    EXPECT_EQ(DataTypeSize(t), sizes[i]) << i;
  }
  EXPECT_STREQ(DataTypeName(static_cast<DataType>(kNumDataTypes)), "unknown");
  EXPECT_FALSE(IsFloating(DataType::BOOL));
  EXPECT_FALSE(IsInteger(DataType::BOOL));
  for (DataType t : {DataType::UINT8, DataType::INT8, DataType::UINT16, DataType::INT16,
                     DataType::INT32, DataType::INT64})
    EXPECT_TRUE(IsInteger(t) && !IsFloating(t)) << DataTypeName(t);
  for (DataType t : {DataType::FLOAT16, DataType::BFLOAT16, DataType::FLOAT32, DataType::FLOAT64})
    EXPECT_TRUE(IsFloating(t) && !IsInteger(t)) << DataTypeName(t);
}

// NCCL has no 16-bit integer type: a GPU reduction of one is refused (every rank alike, at
// negotiation); on the CPU, and for the ops that move bytes, they run.
TEST(UnsupportedReduction, SixteenBitIntegersAreNotReducedOnTheGpu) {
  for (DataType t : {DataType::UINT16, DataType::INT16}) {
    OpSpec s;
    s.dtype = t;
    for (OpType op : {OpType::ALLREDUCE, OpType::REDUCESCATTER}) {
      s.type = op;
      s.gpu = false;
      EXPECT_EQ(UnsupportedReduction(s), "") << DataTypeName(t);
      s.gpu = true;
      const std::string why = UnsupportedReduction(s);
      EXPECT_NE(why.find(std::string(DataTypeName(t)) + " on GPU"), std::string::npos) << why;
      EXPECT_NE(why.find("NCCL"), std::string::npos) << why;
    }
    for (OpType op : {OpType::ALLGATHER, OpType::BROADCAST, OpType::ALLTOALL}) {
      s.type = op;
      EXPECT_EQ(UnsupportedReduction(s), "") << OpTypeName(op);
    }
  }
  OpSpec f;
  f.dtype = DataType::INT32;
  f.gpu = true;
  EXPECT_EQ(UnsupportedReduction(f), "");
}

TEST(UnsupportedReduction, BoolIsMovedNeverReduced) {
  OpSpec s;
  s.dtype = DataType::BOOL;
  for (OpType t : {OpType::ALLREDUCE, OpType::REDUCESCATTER}) {
    s.type = t;
    const std::string why = UnsupportedReduction(s);
    EXPECT_NE(why.find("bool"), std::string::npos) << why;
  }
  for (OpType t : {OpType::ALLGATHER, OpType::BROADCAST, OpType::ALLTOALL}) {
    s.type = t;
    EXPECT_EQ(UnsupportedReduction(s), "") << OpTypeName(t);
  }
}

// Scale factors on any reduction dtype, integers included (upstream scales those in double and
// truncates: ScaleInPlace); they never make a spec unsupported by themselves.
TEST(UnsupportedReduction, ScaleFactorsOnEveryReductionDtype) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    OpSpec s;
    s.dtype = static_cast<DataType>(i);
    if (s.dtype == DataType::BOOL) continue;
    for (OpType t : {OpType::ALLREDUCE, OpType::REDUCESCATTER}) {
      s.type = t;
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MAX}) {
        s.reduce_op = op;
        for (double pre : {1.0, 0.5, 3.0})
          for (double post : {1.0, 2.0, 0.25}) {
            s.prescale = pre;
            s.postscale = post;
            EXPECT_EQ(UnsupportedReduction(s), "") << DataTypeName(s.dtype) << " " << pre;
          }
      }
    }
  }
}

// Adasum: a host-memory allreduce of a floating dtype over a power-of-two number of ranks, with
// any scale factors; everything else is refused with the reason.
TEST(UnsupportedReduction, AdasumLimits) {
  OpSpec s;
  s.reduce_op = ReduceOp::ADASUM;
  for (int i = 0; i < kNumDataTypes; ++i) {
    s.dtype = static_cast<DataType>(i);
    const std::string why = UnsupportedReduction(s, 4);
    if (IsFloating(s.dtype)) {
      EXPECT_EQ(why, "") << DataTypeName(s.dtype);
    } else {
      EXPECT_NE(why.find("Adasum needs a floating-point dtype"), std::string::npos) << why;
      EXPECT_NE(why.find(DataTypeName(s.dtype)), std::string::npos) << why;
    }
  }
  s.dtype = DataType::FLOAT32;
  s.prescale = 0.5;
  s.postscale = 3.0;
  for (int ranks : {0, 1, 2, 4, 8, 64}) EXPECT_EQ(UnsupportedReduction(s, ranks), "") << ranks;
  for (int ranks : {3, 5, 6, 12}) {
    const std::string why = UnsupportedReduction(s, ranks);
    EXPECT_NE(why.find("power-of-two number of ranks, this job has " + std::to_string(ranks)),
              std::string::npos)
        << why;
  }
  s.gpu = true;
  EXPECT_NE(UnsupportedReduction(s, 2).find("Adasum on GPU is not supported"), std::string::npos);
  s.gpu = false;
  s.type = OpType::REDUCESCATTER;
  EXPECT_NE(UnsupportedReduction(s, 2).find("reducescatter with Adasum is not supported"),
            std::string::npos);
}

TEST(OpSpec, RequestAndResponseShareIt) {
  Request req = SomeRequest("t");
  Response resp;
  resp.spec() = req.spec();
  EXPECT_TRUE(resp.spec() == SomeSpec());
  EXPECT_EQ(resp.root, 7);
  EXPECT_EQ(resp.names.size(), 0u);  // only the spec was copied
}

TEST(Request, SameParamsComparesSpecShapeSplitsNameAndGroup) {
  Request a = SomeRequest("t"), b = SomeRequest("t");
  a.invalid.clear();
  b.invalid.clear();
  EXPECT_TRUE(a.SameParams(b));
  b.rank = 0;  // the rank is not a parameter
  EXPECT_TRUE(a.SameParams(b));
  Request c = b;
  c.postscale = 2.0;
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.gpu = false;
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.shape = {4, 0, 8};
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.splits = {2, 1, 1};
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.name = "u";
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.group_size = 11;  // a group of another size: ranks must agree on it again
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.group = "other";
  EXPECT_FALSE(a.SameParams(c));
  c = b;
  c.invalid = "x";  // an invalid request never takes the fast path
  EXPECT_FALSE(a.SameParams(c));
  EXPECT_FALSE(c.SameParams(a));
}

TEST(Response, TotalBytesUsesTheDtype) {
  Response r;
  r.dtype = DataType::FLOAT64;
  r.num_elements = {3, 4};
  EXPECT_EQ(r.TotalBytes(), 56);
  r.dtype = DataType::FLOAT16;
  EXPECT_EQ(r.TotalBytes(), 14);
}

TEST(RequestList, RoundTripsEveryField) {
  RequestList in;
  in.shutdown = true;
  in.requests = {SomeRequest("first"), Request(), SomeRequest(std::string("nul\0inside", 10))};
  in.requests[1].name = "defaults";
  const std::string blob = Encode(in);
  RequestList out;
  out.requests.resize(5);  // stale content is replaced
  ASSERT_TRUE(Decode(blob.data(), blob.size(), &out));
  EXPECT_TRUE(out.shutdown);
  ASSERT_EQ(out.requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) ExpectSameRequest(in.requests[i], out.requests[i]);
  EXPECT_EQ(Encode(out), blob);
}

TEST(RequestList, EveryDtypeRoundTrips) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    RequestList in, out;
    in.requests = {SomeRequest("t")};
    in.requests[0].dtype = static_cast<DataType>(i);
    const std::string blob = Encode(in);
    ASSERT_TRUE(Decode(blob.data(), blob.size(), &out)) << i;
    ExpectSameRequest(in.requests[0], out.requests[0]);
  }
}

// Out-of-range enum bytes (a garbled message, or a peer with values this build lacks) are
// refused, never decoded into a dtype without a name or size. `spec_at`: the spec's first byte.
template <typename List>
void ExpectUnknownEnumsRefused(const std::string& blob, size_t spec_at) {
  // The spec's first three fields: op type, dtype and reduce op, one byte each.
  const std::pair<size_t, int> fields[] = {
      {spec_at, kNumOpTypes}, {spec_at + 1, kNumDataTypes}, {spec_at + 2, kNumReduceOps}};
  for (const auto& f : fields) {
    for (int bad : {f.second, 255}) {
      std::string g = blob;
      g[f.first] = static_cast<char>(bad);
      List l;
      EXPECT_FALSE(Decode(g.data(), g.size(), &l)) << "byte " << f.first << " = " << bad;
    }
    std::string g = blob;
    g[f.first] = static_cast<char>(f.second - 1);  // the last known value decodes
    List l;
    EXPECT_TRUE(Decode(g.data(), g.size(), &l)) << "byte " << f.first;
  }
}

TEST(RequestList, UnknownEnumValuesAreRefused) {
  RequestList in;
  in.requests = {SomeRequest("a")};
  // Layout: shutdown byte, the request count, the rank, then the spec.
  ExpectUnknownEnumsRefused<RequestList>(Encode(in), 1 + 8 + 4);
}

TEST(ResponseList, UnknownEnumValuesAreRefused) {
  ResponseList in;
  in.responses = {SomeResponse()};
  // Layout: shutdown byte, the (empty) reason's length, the response count, then the spec.
  ExpectUnknownEnumsRefused<ResponseList>(Encode(in), 1 + 8 + 8);
}

TEST(RequestList, EmptyRoundTrips) {
  RequestList in, out;
  const std::string blob = Encode(in);
  ASSERT_TRUE(Decode(blob.data(), blob.size(), &out));
  EXPECT_FALSE(out.shutdown);
  EXPECT_TRUE(out.requests.empty());
}

TEST(ResponseList, RoundTripsEveryField) {
  ResponseList in;
  in.shutdown = true;
  in.shutdown_reason = "rank 2 called shutdown()";
  in.shutdown_on_every_rank = true;  // local only: not encoded
  in.joined = {2, 0};
  in.responses = {SomeResponse(), Response()};
  in.responses[0].contributors = 3;
  const std::string blob = Encode(in);
  ResponseList out;
  ASSERT_TRUE(Decode(blob.data(), blob.size(), &out));
  EXPECT_TRUE(out.shutdown);
  EXPECT_EQ(out.shutdown_reason, in.shutdown_reason);
  EXPECT_FALSE(out.shutdown_on_every_rank);
  EXPECT_EQ(out.joined, in.joined);
  ASSERT_EQ(out.responses.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Response &a = in.responses[i], &b = out.responses[i];
    EXPECT_TRUE(a.spec() == b.spec()) << i;
    EXPECT_EQ(a.names, b.names) << i;
    EXPECT_EQ(a.num_elements, b.num_elements) << i;
    EXPECT_EQ(a.first_dims, b.first_dims) << i;
    EXPECT_EQ(a.error, b.error) << i;
    EXPECT_EQ(a.error_is_invalid_argument, b.error_is_invalid_argument) << i;
    EXPECT_EQ(a.contributors, b.contributors) << i;
  }
  EXPECT_EQ(Encode(out), blob);
}

// Every proper prefix of a valid message, and the message with a byte appended, is refused.
template <typename List>
void ExpectOnlyTheExactLengthDecodes(const std::string& blob) {
  for (size_t n = 0; n < blob.size(); ++n) {
    List l;
    EXPECT_FALSE(Decode(blob.data(), n, &l))
        << "prefix of " << n << " of " << blob.size() << " bytes";
  }
  std::string longer = blob + '\0';
  List l;
  EXPECT_FALSE(Decode(longer.data(), longer.size(), &l));
}

TEST(RequestList, TruncatedOrTrailingBytesAreRefused) {
  RequestList in;
  in.requests = {SomeRequest("a"), SomeRequest("bb")};
  ExpectOnlyTheExactLengthDecodes<RequestList>(Encode(in));
}

TEST(ResponseList, TruncatedOrTrailingBytesAreRefused) {
  ResponseList in;
  in.shutdown_reason = "why";
  in.responses = {SomeResponse(), SomeResponse()};
  ExpectOnlyTheExactLengthDecodes<ResponseList>(Encode(in));
}

TEST(ResponseList, TunedParamsRoundTripOnlyWhenPresent) {
  ResponseList in;
  in.responses = {SomeResponse()};
  const std::string without = Encode(in);
  in.has_params = true;
  in.params = {4 << 20, 2.5, true};
  const std::string with = Encode(in);
  EXPECT_EQ(with.size(), without.size() + 8 + 8 + 1);
  ResponseList out;
  ASSERT_TRUE(Decode(with.data(), with.size(), &out));
  EXPECT_TRUE(out.has_params);
  EXPECT_EQ(out.params.fusion_threshold, 4 << 20);
  EXPECT_EQ(out.params.cycle_time_ms, 2.5);
  EXPECT_TRUE(out.params.final);
  ResponseList plain;
  ASSERT_TRUE(Decode(without.data(), without.size(), &plain));
  EXPECT_FALSE(plain.has_params);
  ExpectOnlyTheExactLengthDecodes<ResponseList>(with);
}

TEST(ResponseList, TunedParamsNoKnobCouldHoldAreRefused) {
  ResponseList in;
  in.has_params = true;
  for (TunedParams bad : {TunedParams{-1, 1.0, false}, TunedParams{0, -0.5, false},
                          TunedParams{0, 1e9, false}, TunedParams{0, std::nan(""), false}}) {
    in.params = bad;
    const std::string blob = Encode(in);
    ResponseList out;
    EXPECT_FALSE(Decode(blob.data(), blob.size(), &out)) << bad.fusion_threshold;
  }
  in.params = {0, 1.0, false};
  std::string blob = Encode(in);
  blob.back() = 2;  // the final flag is a bool byte
  ResponseList out;
  EXPECT_FALSE(Decode(blob.data(), blob.size(), &out));
}

void Poke(std::string* blob, size_t at, uint64_t value) { std::memcpy(&(*blob)[at], &value, 8); }

TEST(RequestList, GarbledCountsAreRefusedWithoutAllocating) {
  RequestList in;
  in.requests = {SomeRequest("a")};
  const std::string blob = Encode(in);
  // Layout: shutdown byte, then the request count.
  for (uint64_t bad : {uint64_t(2), uint64_t(1) << 40, std::numeric_limits<uint64_t>::max()}) {
    std::string g = blob;
    Poke(&g, 1, bad);
    RequestList out;
    EXPECT_FALSE(Decode(g.data(), g.size(), &out)) << bad;
  }
  // The name's length prefix follows the shutdown byte, the count, the rank and the spec; a
  // request with empty name, shape, splits, invalid and group is all that plus five length
  // prefixes and the group size.
  RequestList bare;
  bare.requests.resize(1);
  const size_t spec_bytes = Encode(bare).size() - 1 - 8 - 4 - 5 * 8 - 4;
  const size_t name_at = 1 + 8 + 4 + spec_bytes;
  std::string g = blob;
  Poke(&g, name_at, std::numeric_limits<uint64_t>::max());
  RequestList out;
  EXPECT_FALSE(Decode(g.data(), g.size(), &out));
}

TEST(ResponseList, GarbledCountsAreRefusedWithoutAllocating) {
  ResponseList in;
  in.responses = {SomeResponse()};
  const std::string blob = Encode(in);
  // Layout: shutdown byte, the reason's length and bytes (empty), then the response count.
  for (uint64_t bad : {uint64_t(2), uint64_t(1) << 40, std::numeric_limits<uint64_t>::max()}) {
    std::string g = blob;
    Poke(&g, 1 + 8, bad);
    ResponseList out;
    EXPECT_FALSE(Decode(g.data(), g.size(), &out)) << bad;
  }
  std::string g = blob;
  Poke(&g, 1, uint64_t(1) << 50);  // the reason's length
  ResponseList out;
  EXPECT_FALSE(Decode(g.data(), g.size(), &out));
}

}  // namespace
}  // namespace hvd
