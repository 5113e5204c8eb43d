#include "qconv/io/wire.h"

namespace qconv::io::wire {

namespace {

/// A varint of at most `max_bytes` bytes at data[*pos, size); advances *pos.
bool readVarint(const uint8_t* data, size_t size, size_t* pos, uint64_t* v, int max_bytes) {
  *v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    if (*pos >= size) return false;
    const uint8_t b = data[(*pos)++];
    *v |= uint64_t{b & 0x7fu} << (7 * i);
    if (!(b & 0x80u)) return true;
  }
  return false;  // too long: protobuf rejects it too
}

}  // namespace

bool readField(const uint8_t* data, size_t size, size_t pos, Field* f) {
  f->begin = pos;
  uint64_t tag = 0;
  if (!readVarint(data, size, &pos, &tag, 5) || tag > UINT32_MAX) return false;
  f->number = static_cast<uint32_t>(tag >> 3);
  f->type = static_cast<uint32_t>(tag & 7);
  if (f->number == 0) return false;
  uint64_t n = 0;
  switch (f->type) {
    case kVarint:
      if (!readVarint(data, size, &pos, &n, 10)) return false;
      break;
    case kFixed64:
      if (size - pos < 8) return false;
      pos += 8;
      break;
    case kFixed32:
      if (size - pos < 4) return false;
      pos += 4;
      break;
    case kLen:
      if (!readVarint(data, size, &pos, &n, 10) || n > size - pos) return false;
      f->payload = pos;
      pos += static_cast<size_t>(n);
      break;
    default: return false;  // groups (3, 4) and the undefined types 6, 7
  }
  f->end = pos;
  return true;
}

size_t varintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

}  // namespace qconv::io::wire
