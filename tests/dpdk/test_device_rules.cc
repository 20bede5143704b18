// SPDX-License-Identifier: BSD-3-Clause
// The rules a device's arguments set for its reader (psgate/device_rules.h),
// which psgate's port start and psgate-gen's both refuse a device by: the
// drivers whose RX queues their arguments fix, and net_null's frame size.
#include <gtest/gtest.h>

#include <string>

#include "psgate/device_rules.h"

namespace psgate {
namespace {

struct FixedCase {
  const char* driver;
  unsigned rx_queues;
  unsigned read;
  const char* expected;  // in the text; nullptr: no refusal
};

TEST(DeviceRules, DriversWhoseArgumentsFixTheirRxQueuesAreReadWhole) {
  const FixedCase cases[] = {
      {"net_af_packet", 2, 1, "its qpairs: the kernel spreads flows over every queue's socket; give qpairs=1"},
      {"net_af_packet", 4, 3, "give qpairs=3"},
      {"net_af_packet", 2, 2, nullptr},
      {"net_af_packet", 1, 1, nullptr},
      {"net_af_packet", 1, 2, nullptr},  // more read than it has: ethdev's own limit, not this rule
      {"net_pcap", 2, 1,
       "one per rx_pcap, rx_iface or rx_iface_in, each a capture or interface of its own; give 1 "
       "rx_pcap, rx_iface or rx_iface_in"},
      {"net_pcap", 3, 2, "give 2 rx_pcap, rx_iface or rx_iface_in"},
      {"net_pcap", 2, 2, nullptr},
      {"net_af_xdp", 2, 1, "its queue_count: an XDP socket per queue"},
      {"net_af_xdp", 2, 1,
       "give queue_count=1 (and the interface as many combined channels: ethtool -L IFACE combined "
       "1)"},
      {"net_af_xdp", 4, 2, "give queue_count=2"},
      {"net_af_xdp", 1, 1, nullptr},
      // Devices whose queues are the reader's to choose, or carry nothing of their own.
      {"net_ring", 4, 1, nullptr},
      {"net_null", 16, 1, nullptr},
      {"net_memif", 2, 1, nullptr},
      {"", 2, 1, nullptr},
  };
  for (const FixedCase& c : cases) {
    const std::string why = unread_fixed_rx_queues(c.driver, c.rx_queues, c.read);
    const std::string where = std::string(c.driver) + " " + std::to_string(c.rx_queues) + " read " +
                              std::to_string(c.read) + ": '" + why + "'";
    if (c.expected == nullptr) {
      EXPECT_EQ(why, "") << where;
    } else {
      EXPECT_NE(why.find(c.expected), std::string::npos) << where;
    }
  }
}

// af_xdp on an interface with more combined channels than its queues: the
// frames of the others go to the kernel. Said, with the remedy.
TEST(DeviceRules, XdpChannelsItDoesNotReadAreNamed) {
  EXPECT_EQ(xdp_channels_unread("xq0", 2, 0, 1),
            "xq0 spreads flows over 2 combined channels and af_xdp reads queue 0 of them (start_queue 0, queue_count "
            "1): the frames of the others go to the kernel instead of this port; give it 1 (ethtool -L xq0 combined "
            "1) or steer every frame to queue 0 (ethtool -N)");
  EXPECT_NE(xdp_channels_unread("eth1", 8, 2, 4).find("reads queues 2 to 5 of them (start_queue 2, queue_count 4)"),
            std::string::npos);
  EXPECT_NE(xdp_channels_unread("eth1", 4, 2, 2).find("give it 2 (ethtool -L eth1 combined 2, and start_queue=0)"),
            std::string::npos);
  EXPECT_EQ(xdp_channels_unread("xq0", 2, 0, 2), "");
  EXPECT_EQ(xdp_channels_unread("xq0", 1, 0, 1), "");
  EXPECT_EQ(xdp_channels_unread("veth0", 0, 0, 1), "");  // no channels reported: af_xdp reads it as one
}

TEST(DeviceRules, DeviceArgumentsAreReadAsTheDriverReadsThem) {
  EXPECT_EQ(device_arg("iface=eth1,start_queue=2", "start_queue"), "2");
  EXPECT_EQ(device_arg("iface=eth1,iface=eth2", "iface"), "eth2");
  EXPECT_EQ(device_arg("iface=eth1", "start_queue"), "");
  EXPECT_EQ(device_arg("", "iface"), "");
}

struct SizeCase {
  const char* args;
  const char* expected;  // in the text; nullptr: no refusal
};

TEST(DeviceRules, NetNullSizesItCannotMakeAreRefused) {
  const SizeCase cases[] = {
      {"size=0", "size=0 makes frames of 0 bytes, for which net_null can set up no queue"},
      {"size=0", "give size=64 (the default) up to 2048 (the packet data an mbuf holds)"},
      {"size=abc", "size=abc, which net_null reads as 0, makes frames of 0 bytes"},
      {"size=4294967296", "which net_null reads as 0"},      // cut to unsigned int, as net_null does
      {"size=0,no-rx=1", "size=0 makes frames of 0 bytes"},  // the queues' setup fails all the same
      {"size=64,size=0", "size=0 makes"},                    // the last one given, as net_null reads them
      {"size=2049", "size=2049 makes frames larger than the 2048 bytes of packet data an mbuf holds"},
      {"size=3000", "hand over mbufs longer than their buffers, every one dropped as bad_mbuf; give size=2048 or less"},
      {"size=3000,copy=1", "copy each one past the end of its mbuf"},
      {"size=0x801", "size=0x801 makes frames larger"},
      {"size=0,size=64", nullptr},
      {"size=2048", nullptr},
      {"size=0x800,copy=1", nullptr},
      {"size=1", nullptr},  // a runt, which psgate counts as one
      {"size=3000,no-rx=1", nullptr},
      {"copy=1", nullptr},
      {"no-rx=1", nullptr},
      {"", nullptr},
  };
  for (const SizeCase& c : cases) {
    const std::string why = null_size_refused(c.args, 2048);
    if (c.expected == nullptr) {
      EXPECT_EQ(why, "") << c.args;
    } else {
      EXPECT_NE(why.find(c.expected), std::string::npos) << c.args << ": '" << why << "'";
    }
  }
  EXPECT_EQ(null_size_refused("size=9000", 9088), "");
  EXPECT_NE(null_size_refused("size=9089", 9088), "");
}

}  // namespace
}  // namespace psgate
