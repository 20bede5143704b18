// SPDX-License-Identifier: BSD-3-Clause
// Classic pcap reader/writer. See pcap_file.h.
//
// File layout (all fields in the writer's byte order, told by the magic):
//   header 24 B: magic, version 2.4, thiszone, sigfigs, snaplen, linktype
//   record 16 B: ts_sec, ts_usec (or ts_nsec), incl_len, orig_len; then data
#include "pcap_file.h"

#include <cerrno>
#include <cstring>
#include <memory>

namespace psgate::pkt {
namespace {

// Anything larger is not a real capture record but a corrupt length; refusing
// it avoids allocating gigabytes on a bad file.
constexpr uint32_t kMaxRecordLen = 256 * 1024;

uint32_t bswap32(uint32_t v) { return __builtin_bswap32(v); }
uint16_t bswap16(uint16_t v) { return __builtin_bswap16(v); }

struct FileHeader {
  uint32_t magic;
  uint16_t version_major;
  uint16_t version_minor;
  int32_t thiszone;
  uint32_t sigfigs;
  uint32_t snaplen;
  uint32_t linktype;
};
static_assert(sizeof(FileHeader) == 24);

struct RecordHeader {
  uint32_t ts_sec;
  uint32_t ts_frac;  // microseconds or nanoseconds, per the magic
  uint32_t incl_len;
  uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16);

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

PcapWriter::~PcapWriter() { close(); }

PcapWriter::PcapWriter(PcapWriter&& other) noexcept
    : file_(other.file_), path_(std::move(other.path_)), error_(std::move(other.error_)) {
  other.file_ = nullptr;
}

PcapWriter& PcapWriter::operator=(PcapWriter&& other) noexcept {
  if (this != &other) {
    close();
    file_ = other.file_;
    path_ = std::move(other.path_);
    error_ = std::move(other.error_);
    other.file_ = nullptr;
  }
  return *this;
}

bool PcapWriter::fail(const std::string& what) {
  error_ = path_ + ": " + what;
  return false;
}

bool PcapWriter::open(const std::string& path, uint32_t snaplen) {
  close();
  path_ = path;
  snaplen_ = snaplen;
  error_.clear();
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) return fail("cannot create: " + errno_text());
  const FileHeader h{kPcapMagicMicro, 2, 4, 0, 0, snaplen, kPcapLinktypeEthernet};
  if (std::fwrite(&h, sizeof h, 1, file_) != 1) {
    std::fclose(file_);
    file_ = nullptr;
    return fail("cannot write header: " + errno_text());
  }
  return true;
}

bool PcapWriter::write(const uint8_t* data, size_t len, uint64_t ts_ns) {
  const uint32_t incl = len > snaplen_ ? snaplen_ : static_cast<uint32_t>(len);
  return write_record(data, incl, static_cast<uint32_t>(len), ts_ns);
}

bool PcapWriter::write_record(const uint8_t* data, uint32_t caplen, uint32_t orig_len, uint64_t ts_ns) {
  if (file_ == nullptr) return fail("write on a closed pcap writer");
  const RecordHeader r{static_cast<uint32_t>(ts_ns / 1000000000), static_cast<uint32_t>(ts_ns % 1000000000 / 1000),
                       caplen, orig_len};
  if (std::fwrite(&r, sizeof r, 1, file_) != 1 || (caplen != 0 && std::fwrite(data, caplen, 1, file_) != 1)) {
    return fail("write failed: " + errno_text());
  }
  return true;
}

bool PcapWriter::close() {
  if (file_ == nullptr) return error_.empty();
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  return ok ? error_.empty() : fail("close failed: " + errno_text());
}

Result<std::vector<PcapRecord>> read_pcap(const std::string& path) {
  using R = Result<std::vector<PcapRecord>>;
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return R::failure(path + ": cannot open: " + errno_text());

  FileHeader h;
  if (std::fread(&h, sizeof h, 1, f.get()) != 1) return R::failure(path + ": no pcap file header");
  bool swap = false;
  bool nano = false;
  switch (h.magic) {
    case kPcapMagicMicro:
      break;
    case kPcapMagicNano:
      nano = true;
      break;
    default:
      if (h.magic == bswap32(kPcapMagicMicro)) {
        swap = true;
      } else if (h.magic == bswap32(kPcapMagicNano)) {
        swap = nano = true;
      } else {
        char buf[64];
        std::snprintf(buf, sizeof buf, ": bad magic 0x%08x (pcapng is not supported)", h.magic);
        return R::failure(path + buf);
      }
  }
  auto u32 = [swap](uint32_t v) { return swap ? bswap32(v) : v; };
  if ((swap ? bswap16(h.version_major) : h.version_major) != 2) {
    return R::failure(path + ": unsupported pcap version");
  }
  // The upper bits of the link type field carry FCS information (pcap spec).
  const uint32_t linktype = u32(h.linktype) & 0xffff;
  if (linktype != kPcapLinktypeEthernet) {
    return R::failure(path + ": link type " + std::to_string(linktype) + " is not Ethernet");
  }

  std::vector<PcapRecord> out;
  RecordHeader r;
  for (;;) {
    const size_t got = std::fread(&r, 1, sizeof r, f.get());
    if (got == 0) break;  // clean end of file
    if (got != sizeof r) {
      return R::failure(path + ": truncated record header after " + std::to_string(out.size()) + " records");
    }
    const uint32_t incl = u32(r.incl_len);
    if (incl > kMaxRecordLen) {
      return R::failure(path + ": record " + std::to_string(out.size()) + " claims " + std::to_string(incl) + " bytes");
    }
    PcapRecord rec;
    rec.ts_ns = uint64_t{u32(r.ts_sec)} * 1000000000 + uint64_t{u32(r.ts_frac)} * (nano ? 1 : 1000);
    rec.orig_len = u32(r.orig_len);
    rec.bytes.resize(incl);
    if (incl != 0 && std::fread(rec.bytes.data(), incl, 1, f.get()) != 1) {
      return R::failure(path + ": truncated record " + std::to_string(out.size()));
    }
    out.push_back(std::move(rec));
  }
  if (std::ferror(f.get())) return R::failure(path + ": read error: " + errno_text());
  return out;
}

}  // namespace psgate::pkt
