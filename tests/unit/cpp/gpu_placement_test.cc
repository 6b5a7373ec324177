// The shared-GPU sentence that stops NCCL from starting (ops/gpu_placement.h).
#include "ops/gpu_placement.h"

#include <gtest/gtest.h>

namespace hvd {
namespace {

TEST(GpuPlacement, OwnGpuEachIsFine) {
  EXPECT_EQ(SharedGpuProblem({{"a", "m-a", "0000:01:00.0", 0}, {"a", "m-a", "0000:02:00.0", 1}}),
            "");
  // The same bus id on two hosts is two GPUs.
  EXPECT_EQ(SharedGpuProblem({{"a", "m-a", "0000:01:00.0", 0}, {"b", "m-b", "0000:01:00.0", 0}}),
            "");
  EXPECT_EQ(SharedGpuProblem({}), "");
}

TEST(GpuPlacement, NamesTheRanksTheGpuAndTheHost) {
  const std::string s = SharedGpuProblem({{"a", "m-a", "0000:01:00.0", 0},
                                          {"a", "m-a", "0000:01:00.0", 0},
                                          {"a", "m-a", "0000:02:00.0", 1}});
  EXPECT_NE(s.find("ranks 0 and 1 all use GPU 0000:01:00.0 (device 0) on host a"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("rank 2"), std::string::npos) << s;
  EXPECT_NE(s.find("hvd.local_rank()"), std::string::npos) << s;
}

TEST(GpuPlacement, SameGpuUnderDifferentDeviceNumbers) {
  // CUDA_VISIBLE_DEVICES=1 on rank 1 makes the physical GPU of rank 0's device 1 its device 0.
  const std::string s =
      SharedGpuProblem({{"a", "m-a", "0000:02:00.0", 1}, {"a", "m-a", "0000:02:00.0", 0}});
  EXPECT_NE(s.find("ranks 0 and 1 all use GPU 0000:02:00.0"), std::string::npos) << s;
}

TEST(GpuPlacement, ContainersOnOneMachineShareItsGpus) {
  // Two containers (host names differ) on one machine (same boot_id) using its one GPU.
  const std::string s =
      SharedGpuProblem({{"c1", "boot", "0000:01:00.0", 0}, {"c2", "boot", "0000:01:00.0", 0}});
  EXPECT_NE(
      s.find(
          "ranks 0 and 1 all use GPU 0000:01:00.0 (device 0) on the one machine of hosts c1, c2"),
      std::string::npos)
      << s;
}

TEST(GpuPlacement, ManySharedGpusAreCounted) {
  std::vector<GpuPlacement> v;
  for (int r = 0; r < 12; ++r) {
    const std::string h = "h" + std::to_string(r / 2);
    v.push_back({h, "m-" + h, "0000:01:00.0", 0});
  }
  const std::string s = SharedGpuProblem(v);
  EXPECT_NE(s.find("ranks 0 and 1 all use"), std::string::npos) << s;
  EXPECT_NE(s.find("and 3 more shared GPU(s)"), std::string::npos) << s;
  const std::string three =
      SharedGpuProblem({{"a", "m-a", "x", 0}, {"a", "m-a", "x", 0}, {"a", "m-a", "x", 0}});
  EXPECT_NE(three.find("ranks 0, 1 and 2 all use GPU x"), std::string::npos) << three;
}

}  // namespace
}  // namespace hvd
