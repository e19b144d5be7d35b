#include "star/core/api/pod_bandwidth.h"

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

TEST(ParseBitsPerSecond, ReadsDecimalAndBinarySuffixes) {
  EXPECT_EQ(ParseBitsPerSecond("800M"), 800'000'000);
  EXPECT_EQ(ParseBitsPerSecond("1G"), 1'000'000'000);
  EXPECT_EQ(ParseBitsPerSecond("1.5k"), 1500);
  EXPECT_EQ(ParseBitsPerSecond("10Mi"), 10 * 1048576);
  EXPECT_EQ(ParseBitsPerSecond("64"), 64);
  EXPECT_EQ(ParseBitsPerSecond(json(2.0e6)), 2'000'000);
}

TEST(ParseBitsPerSecond, RefusesWhatIsNotABandwidth) {
  for (const json& bad : {json("fast"), json(""), json("1m"), json("10 M"), json("-1M"), json("0"), json("1e3"),
                          json("9999999999999999999G"), json("11T"), json(true), json::array()}) {
    EXPECT_FALSE(ParseBitsPerSecond(bad)) << bad.dump();
  }
}

TEST(PodBandwidth, TakesBothDirectionsFromTheAnnotations) {
  auto net = PodBandwidth({{"kubernetes.io/egress-bandwidth", "800M"}, {"kubernetes.io/ingress-bandwidth", "1G"},
                           {"other", "x"}},
                          "metadata.annotations");
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ(net->egress_bits_per_second, 800'000'000);
  EXPECT_EQ(net->ingress_bits_per_second, 1'000'000'000);
  auto none = PodBandwidth(json(), "metadata.annotations");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, NetworkAllocation{});
}

TEST(PodBandwidth, ABadValueIsRefusedNamingTheAnnotation) {
  auto net = PodBandwidth({{"kubernetes.io/egress-bandwidth", "lots"}}, "spec.workers.template.metadata.annotations");
  ASSERT_FALSE(net.ok());
  EXPECT_NE(net.status().message().find(
                "spec.workers.template.metadata.annotations[\"kubernetes.io/egress-bandwidth\"]: must be a bandwidth"),
            std::string::npos)
      << net.status();
  EXPECT_FALSE(PodBandwidth({{"kubernetes.io/ingress-bandwidth", 5}}, "a").ok()) << "annotations are strings";
  EXPECT_FALSE(PodBandwidth(json::array(), "a").ok());
}

}  // namespace
}  // namespace star::api
