// The protobuf wire format, just enough to walk a message's top-level fields: the reader
// leaves large tensor bytes in the file (model_file.cpp) and the writer splices them back in
// (write_model.cpp) without holding them in memory. Everything else is parsed and serialized
// by protobuf itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qconv::io::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

/// One top-level field of a serialized message: [begin, end) is the whole field, tag included.
/// For a length-delimited field (kLen), [payload, end) is its content.
struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  size_t begin = 0, payload = 0, end = 0;
};

/// Read the field that starts at `pos` of data[0, size). False when it is malformed, runs past
/// `size`, or is a group (which this walker does not follow; protobuf does).
bool readField(const uint8_t* data, size_t size, size_t pos, Field* field);

/// Bytes a varint of `v` takes.
size_t varintSize(uint64_t v);

/// Append `v` as a varint.
void putVarint(std::string& out, uint64_t v);

/// The tag of a length-delimited field `number`.
inline uint64_t lenTag(uint32_t number) { return (uint64_t{number} << 3) | kLen; }

}  // namespace qconv::io::wire
