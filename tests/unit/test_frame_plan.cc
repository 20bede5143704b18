// SPDX-License-Identifier: BSD-3-Clause
// Frame sizing for the configured MTU: which mbufs and offloads each
// combination of device capabilities gets, and the errors that name the key.
#include "psgate/frame_plan.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

PortCapacity device(const std::string& name, uint32_t limit) {
  PortCapacity c;
  c.name = name;
  c.mtu_limit = limit;
  c.limit_source = "test";
  return c;
}

ConfigSpec with_mtu(uint32_t mtu) {
  ConfigSpec c;
  c.wire.mtu = c.host.mtu = mtu;
  return c;
}

TEST(FramePlan, StandardMtuUsesDefaultMbufs) {
  const PortCapacity caps[2] = {device("w", 1500), device("h", 1500)};
  const auto plan = plan_frames(with_mtu(1500), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_EQ(plan->max_frame, 1500u + 14 + 16);
  EXPECT_EQ(plan->data_room, kDefaultDataRoom);
  EXPECT_FALSE(plan->scatter[0]);
  EXPECT_FALSE(plan->scatter[1]);
}

TEST(FramePlan, MtuAboveTheDeviceLimitNamesKeyAndLimit) {
  const PortCapacity caps[2] = {device("w", 9000), device("net_ring1", 1500)};
  const auto plan = plan_frames(with_mtu(9000), caps);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("ports.host.mtu: 9000"), std::string::npos) << plan.error();
  EXPECT_NE(plan.error().find("net_ring1"), std::string::npos) << plan.error();
  EXPECT_NE(plan.error().find("MTU 1500"), std::string::npos) << plan.error();
  // The limit itself is accepted.
  EXPECT_TRUE(plan_frames(with_mtu(1500), caps).ok());
}

TEST(FramePlan, JumboWithScatterOnBothPortsKeepsSmallMbufs) {
  PortCapacity caps[2] = {device("w", 9600), device("h", 9600)};
  caps[0].scatter_offload = caps[1].scatter_offload = true;
  caps[0].multi_seg_tx = caps[1].multi_seg_tx = true;
  const auto plan = plan_frames(with_mtu(9000), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_EQ(plan->data_room, kDefaultDataRoom);
  EXPECT_TRUE(plan->scatter[0]);
  EXPECT_TRUE(plan->scatter[1]);
  EXPECT_TRUE(plan->multi_seg_tx[0]);
  EXPECT_NE(plan->describe(0).find("scatter RX offload"), std::string::npos) << plan->describe(0);
}

TEST(FramePlan, JumboWhereOnePortCannotChainGetsFrameSizedMbufs) {
  PortCapacity caps[2] = {device("w", 9600), device("h", 9600)};
  caps[0].chains_by_itself = true;  // e.g. memif
  caps[0].multi_seg_tx = caps[1].multi_seg_tx = true;
  const auto plan = plan_frames(with_mtu(9000), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_GE(plan->data_room, plan->max_frame);
  EXPECT_EQ(plan->data_room % 64, 0u);
  EXPECT_FALSE(plan->scatter[0]);
  EXPECT_FALSE(plan->scatter[1]);
  EXPECT_NE(plan->describe(1).find("one per frame"), std::string::npos) << plan->describe(1);
}

TEST(FramePlan, ChainsOnlyWhereBothPortsCanSendThem) {
  PortCapacity caps[2] = {device("w", 9600), device("h", 9600)};
  caps[0].scatter_offload = caps[1].scatter_offload = true;
  caps[0].multi_seg_tx = true;  // the host port could receive a chain it cannot send
  const auto plan = plan_frames(with_mtu(9000), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_GE(plan->data_room, plan->max_frame);
  EXPECT_FALSE(plan->scatter[0]);
  EXPECT_EQ(plan->max_segs[1], 1u) << "no chain for a port without multi-segment TX";
  EXPECT_EQ(plan->max_segs[0], kAnySegmentCount);
  EXPECT_EQ(plan->describe(1).find("at most"), std::string::npos) << plan->describe(1);
}

TEST(FramePlan, AfPacketFramesSizeTheMbufsWhateverTheMtu) {
  // af_packet copies a whole ring frame into one mbuf: with framesz 16384 a
  // 2 KB mbuf could be overrun even at MTU 1500.
  PortCapacity caps[2] = {device("w", 16000), device("h", 16000)};
  caps[0].min_data_room = caps[1].min_data_room = 16384 - 52;
  const auto plan = plan_frames(with_mtu(1500), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_GE(plan->data_room, 16384u - 52);
}

// Jumbo chains on devices that chain both ways (scatter RX, multi-segment TX).
PortCapacity chaining(const std::string& name, uint16_t tx_max_segs) {
  PortCapacity c = device(name, 65000);
  c.scatter_offload = c.multi_seg_tx = true;
  c.tx_max_segs = tx_max_segs;
  return c;
}

TEST(FramePlan, AFrameNeverNeedsMoreSegmentsThanADeviceSends) {
  // MTU 20000: 20030-byte frames, 10 segments of 2 KB; the host port sends
  // at most 8 (i40e), so the mbufs grow to whole KiB that make it 7.
  const PortCapacity caps[2] = {chaining("w", 0), chaining("h", 8)};
  const auto plan = plan_frames(with_mtu(20000), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_EQ(plan->data_room, 3072u);
  EXPECT_LE((plan->max_frame + plan->data_room - 1) / plan->data_room, 8u);
  EXPECT_TRUE(plan->scatter[0]);
  EXPECT_EQ(plan->max_segs[0], kAnySegmentCount) << "0 states no limit";
  EXPECT_EQ(plan->max_segs[1], 8u);
  EXPECT_NE(plan->describe(1).find("at most 8 segments"), std::string::npos) << plan->describe(1);
  EXPECT_EQ(plan->describe(0).find("at most"), std::string::npos) << plan->describe(0);
}

TEST(FramePlan, ChainsWithinTheSegmentLimitKeepDefaultMbufs) {
  const PortCapacity caps[2] = {chaining("w", 8), chaining("h", 8)};
  const auto plan = plan_frames(with_mtu(9000), caps);  // 5 segments
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_EQ(plan->data_room, kDefaultDataRoom);
  // The limit counted in whole segments: 16030 bytes are exactly 8 of 2 KB.
  const auto at_limit = plan_frames(with_mtu(16000), caps);
  ASSERT_TRUE(at_limit.ok()) << at_limit.error();
  EXPECT_EQ(at_limit->data_room, kDefaultDataRoom);
  EXPECT_GT(plan_frames(with_mtu(16400), caps)->data_room, kDefaultDataRoom);
}

TEST(FramePlan, ADeviceThatSendsOneSegmentGetsFrameSizedMbufs) {
  const PortCapacity caps[2] = {chaining("w", 1), chaining("h", 4)};
  const auto plan = plan_frames(with_mtu(9000), caps);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_GE(plan->data_room, plan->max_frame);
  EXPECT_FALSE(plan->scatter[0]);
  EXPECT_FALSE(plan->scatter[1]);
  // Past what one mbuf can hold, the error says why chains do not serve.
  const auto too_big = plan_frames(with_mtu(65000), caps);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().find("at most 1 a packet"), std::string::npos) << too_big.error();
}

TEST(FramePlan, AnMtuNoMbufCanHoldNeedsChains) {
  const PortCapacity caps[2] = {device("w", 65505), device("h", 65505)};
  const auto plan = plan_frames(with_mtu(65500), caps);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("ports.wire.mtu"), std::string::npos) << plan.error();
  EXPECT_NE(plan.error().find("cannot chain"), std::string::npos) << plan.error();
}

}  // namespace
}  // namespace psgate
