// The pods and CPU star_job_cpu_allocation shows for a plan.
#include "reconciler/reallocator.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

TEST(ReallocatorTest, PodCpusOfNamesEachOverriddenPodFromItsNodeAllocation) {
  ReallocationInput in;
  api::NodeAllocation a;
  a.name = "n1";
  api::PodAllocation p;
  p.namespace_ = "team";
  p.name = "fm-worker-0";
  p.uid = "u0";
  a.spec.pods.push_back(p);
  p.name = "other-worker-1";
  p.uid = "u1";
  a.spec.pods.push_back(p);
  in.allocations.push_back(a);
  const std::vector<PlannedPod> cpus = Reallocator::PlannedPodsOf(
      in, {{"u0", {"n1", "team/fm", 3000, 0}}, {"u1", {"n1", "team/other", 500, 600'000'000}}, {"u9", {"n2", "team/fm", 700, 0}}});
  ASSERT_EQ(cpus.size(), 3u);
  EXPECT_EQ(cpus[0].pod, "team/fm-worker-0");
  EXPECT_EQ(cpus[0].node, "n1");
  EXPECT_EQ(cpus[0].millicores, 3000);
  EXPECT_EQ(cpus[1].pod, "team/other-worker-1");
  EXPECT_EQ(cpus[1].millicores, 500);
  EXPECT_EQ(cpus[1].bits_per_second, 600'000'000);
  EXPECT_EQ(cpus[0].bits_per_second, 0);
  EXPECT_EQ(cpus[2].pod, "u9");  // not in a NodeAllocation of the input
  EXPECT_EQ(cpus[2].node, "n2");
}

}  // namespace
}  // namespace star::op
