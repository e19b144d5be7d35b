#include "star/agent/pod_cgroup.h"

#include <gtest/gtest.h>

#include "star/agent/memory_node_os.h"

namespace star::agent {
namespace {

constexpr char kUid[] = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

std::string Path(CgroupDriver d, QosClass q, std::string_view uid = kUid) {
  auto p = PodCgroup(d, q, uid);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : "";
}

TEST(PodCgroupTest, CgroupfsNamesMatchKubelet) {
  EXPECT_EQ(Path(CgroupDriver::kCgroupfs, QosClass::kGuaranteed),
            "kubepods/pod1b4e28ba-2fa1-11d2-883f-0016d3cca427");
  EXPECT_EQ(Path(CgroupDriver::kCgroupfs, QosClass::kBurstable),
            "kubepods/burstable/pod1b4e28ba-2fa1-11d2-883f-0016d3cca427");
  EXPECT_EQ(Path(CgroupDriver::kCgroupfs, QosClass::kBestEffort),
            "kubepods/besteffort/pod1b4e28ba-2fa1-11d2-883f-0016d3cca427");
}

TEST(PodCgroupTest, SystemdNamesMatchKubelet) {
  EXPECT_EQ(Path(CgroupDriver::kSystemd, QosClass::kGuaranteed),
            "kubepods.slice/kubepods-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice");
  EXPECT_EQ(Path(CgroupDriver::kSystemd, QosClass::kBurstable),
            "kubepods.slice/kubepods-burstable.slice/"
            "kubepods-burstable-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice");
  EXPECT_EQ(Path(CgroupDriver::kSystemd, QosClass::kBestEffort),
            "kubepods.slice/kubepods-besteffort.slice/"
            "kubepods-besteffort-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice");
}

TEST(PodCgroupTest, HostileUidsAreRefusedNamingTheField) {
  for (std::string uid : {std::string(""), std::string("../../etc"), std::string("/"),
                          std::string("abc/def"), std::string("abc\ndef"), std::string(".."),
                          std::string("abc def"), std::string(65, 'a'),
                          std::string("abc\0def", 7)}) {
    for (auto d : {CgroupDriver::kCgroupfs, CgroupDriver::kSystemd}) {
      auto p = PodCgroup(d, QosClass::kBurstable, uid);
      ASSERT_FALSE(p.ok()) << uid;
      EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(p.status().message().find("uid"), std::string::npos) << p.status();
    }
  }
  Status s = CheckPodUid("a\nb", "spec.pods[2].uid");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("spec.pods[2].uid"), std::string::npos);
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "control characters are escaped";
}

TEST(PodCgroupTest, InterfaceNamesAreChecked) {
  EXPECT_TRUE(CheckInterfaceName("veth1a2b3c4d").ok());
  EXPECT_TRUE(CheckInterfaceName("cali-12345.ab").ok());
  for (std::string bad : {"", "..", ".", "a/b", "a:b", "a b", "sixteen-chars-xx", "a\nb",
                          "\xc3\xa9t\xc3\xa9"}) {
    EXPECT_EQ(CheckInterfaceName(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PodCgroupTest, CgroupRootIsRelative) {
  EXPECT_TRUE(CheckCgroupRoot("").ok());
  EXPECT_TRUE(CheckCgroupRoot("a/b").ok());
  for (std::string bad : {"/a", "a/", "a//b", "a/../b", "..", "a b"}) {
    EXPECT_EQ(CheckCgroupRoot(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PodCgroupTest, ParsesDriverNames) {
  EXPECT_EQ(*ParseCgroupDriver("cgroupfs"), CgroupDriver::kCgroupfs);
  EXPECT_EQ(*ParseCgroupDriver("systemd"), CgroupDriver::kSystemd);
  EXPECT_EQ(ParseCgroupDriver("sysv").status().code(), StatusCode::kInvalidArgument);
}

TEST(PodCgroupTest, ResolveProbesEveryQosClassUnderTheRoot) {
  MemoryNodeOs os;
  EXPECT_EQ(ResolvePodCgroup(os, CgroupDriver::kCgroupfs, kUid).status().code(),
            StatusCode::kNotFound);
  os.AddCgroup(std::string("root/kubepods/besteffort/pod") + kUid);
  auto r = ResolvePodCgroup(os, CgroupDriver::kCgroupfs, kUid, "root");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->qos, QosClass::kBestEffort);
  EXPECT_EQ(r->cgroup, std::string("root/kubepods/besteffort/pod") + kUid);

  os.AddCgroup(std::string("root/kubepods/pod") + kUid);
  EXPECT_EQ(ResolvePodCgroup(os, CgroupDriver::kCgroupfs, kUid, "root").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResolvePodCgroup(os, CgroupDriver::kCgroupfs, "../x", "root").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::agent
