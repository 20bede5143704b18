// SPDX-License-Identifier: BSD-3-Clause
// Classic libpcap files (not pcapng), Ethernet link type only: integration
// tests write what they send and read back what psgate transmitted (DPDK's
// net_pcap vdev reads and writes this same format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "psgate/result.h"

namespace psgate::pkt {

inline constexpr uint32_t kPcapMagicMicro = 0xa1b2c3d4;
inline constexpr uint32_t kPcapMagicNano = 0xa1b23c4d;
inline constexpr uint32_t kPcapLinktypeEthernet = 1;
inline constexpr uint32_t kPcapSnaplen = 65535;  // bytes

struct PcapRecord {
  uint64_t ts_ns = 0;          // since the epoch; microsecond files give multiples of 1000
  std::vector<uint8_t> bytes;  // captured bytes (at most the snap length)
  uint32_t orig_len = 0;       // length on the wire
};

// Writes microsecond-resolution pcap in host byte order (readers detect it
// from the magic).
class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  PcapWriter(PcapWriter&& other) noexcept;
  PcapWriter& operator=(PcapWriter&& other) noexcept;

  // Creates or truncates `path` and writes the file header with `snaplen`
  // (libpcap reads records up to 256 KiB when the header allows them). On
  // failure returns false and error() says why.
  bool open(const std::string& path, uint32_t snaplen = kPcapSnaplen);
  // Frames longer than the snap length are cut, keeping their original length.
  bool write(const uint8_t* data, size_t len, uint64_t ts_ns);
  // One record exactly as given: `caplen` bytes of `data` captured of a frame
  // of `orig_len` bytes (a capture cut short has caplen < orig_len).
  bool write_record(const uint8_t* data, uint32_t caplen, uint32_t orig_len, uint64_t ts_ns);
  bool write(const std::vector<uint8_t>& frame, uint64_t ts_ns) { return write(frame.data(), frame.size(), ts_ns); }
  // Flushes and closes; false if a buffered write failed.
  bool close();

  bool is_open() const { return file_ != nullptr; }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& what);
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string error_;
  uint32_t snaplen_ = kPcapSnaplen;
};

// Reads a whole pcap file: micro- or nanosecond magic, either byte order.
// Fails on a non-Ethernet link type, a bad magic or a truncated record.
Result<std::vector<PcapRecord>> read_pcap(const std::string& path);

}  // namespace psgate::pkt
