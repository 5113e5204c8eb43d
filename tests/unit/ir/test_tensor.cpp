// ir::storageBytes, the one reader of tensor bytes: every storage ONNX allows for a type gives
// the bytes raw_data would hold, and every reader (readInts, readFloats, ByteStream, the
// repackings' nbits::rawBytes) reads what it gives.
#include <catch2/catch.hpp>

#include <cstring>

#include "qconv/ir/ir.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/nbits_layout.h"

using onnx::TensorProto;

namespace {

std::unique_ptr<TensorProto> tensor(int32_t type, std::vector<int64_t> dims) {
  auto t = std::make_unique<TensorProto>();
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

std::string bytesOf(const TensorProto& t) {
  std::string out, why;
  REQUIRE(qconv::ir::storageBytes(t, qconv::ir::FileBytes{}, out, &why));
  CHECK(why.empty());
  return out;
}

std::string failureOf(const TensorProto& t) {
  std::string out, why;
  REQUIRE_FALSE(qconv::ir::storageBytes(t, qconv::ir::FileBytes{}, out, &why));
  return why;
}

}  // namespace

TEST_CASE("packed 4- and 2-bit types in int32_data read as their raw_data bytes") {
  // what onnx.helper.make_tensor writes: one packed byte per entry, first element in the low bits
  struct Case {
    int32_t type;
    std::vector<int32_t> entries;
    std::vector<int64_t> values;
  };
  const Case cases[] = {
      {TensorProto::INT4, {120, 63, 5}, {-8, 7, -1, 3, 5}},  // make_tensor(INT4, [5], [-8, 7, -1, 3, 5])
      {TensorProto::UINT4, {15, 33, 9}, {15, 0, 1, 2, 9}},
      {TensorProto::INT2, {54, 1}, {-2, 1, -1, 0, 1}},
      {TensorProto::UINT2, {147, 3}, {3, 0, 1, 2, 3}},
  };
  for (const Case& c : cases) {
    CAPTURE(qconv::ir::typeName(c.type));
    auto typed = tensor(c.type, {5});
    for (int32_t e : c.entries) typed->add_int32_data(e);
    auto raw = tensor(c.type, {5});
    std::string packed;
    for (int32_t e : c.entries) packed.push_back(static_cast<char>(e));
    raw->set_raw_data(packed);
    CHECK(bytesOf(*typed) == packed);
    CHECK(qconv::ir::storageProblem(*typed).empty());
    std::string why;
    CHECK(qconv::ir::readInts(*typed, &why) == c.values);
    CHECK(qconv::ir::readInts(*raw, &why) == c.values);
    // both read through a value, as the repackings do
    qconv::ir::Graph g;
    qconv::ir::Value* v = g.addValue("w");
    g.setInitializer(v, std::move(typed));
    CHECK(qconv::nbits::rawBytes(*v, &why) == packed);
    CHECK(why.empty());
    CHECK(qconv::ir::storageProblem(*v).empty());
  }
}

TEST_CASE("every typed field reads as raw_data would hold it") {
  auto f = tensor(TensorProto::FLOAT, {2});
  f->add_float_data(1.5f);
  f->add_float_data(-2.0f);
  const float fv[] = {1.5f, -2.0f};
  CHECK(bytesOf(*f) == std::string(reinterpret_cast<const char*>(fv), sizeof fv));

  auto d = tensor(TensorProto::DOUBLE, {1});
  d->add_double_data(0.25);
  const double dv = 0.25;
  CHECK(bytesOf(*d) == std::string(reinterpret_cast<const char*>(&dv), sizeof dv));

  auto i64 = tensor(TensorProto::INT64, {2});
  i64->add_int64_data(-3);
  i64->add_int64_data(int64_t{1} << 40);
  std::string why;
  CHECK(qconv::ir::readInts(*i64, &why) == std::vector<int64_t>{-3, int64_t{1} << 40});

  auto u32 = tensor(TensorProto::UINT32, {1});
  u32->add_uint64_data(0xdeadbeefu);
  CHECK(bytesOf(*u32) == std::string("\xef\xbe\xad\xde", 4));

  auto i8 = tensor(TensorProto::INT8, {3});
  for (int v : {-128, 5, 127}) i8->add_int32_data(v);
  CHECK(bytesOf(*i8) == std::string("\x80\x05\x7f", 3));

  auto u16 = tensor(TensorProto::UINT16, {2});
  for (int v : {65535, 1}) u16->add_int32_data(v);
  CHECK(bytesOf(*u16) == std::string("\xff\xff\x01\x00", 4));

  auto i16 = tensor(TensorProto::INT16, {1});
  i16->add_int32_data(-2);
  CHECK(qconv::ir::readInts(*i16, &why) == std::vector<int64_t>{-2});

  auto f8 = tensor(17 /* FLOAT8E4M3FN */, {2});
  for (int v : {60, 192}) f8->add_int32_data(v);  // 1.5, -2
  CHECK(bytesOf(*f8) == std::string("\x3c\xc0", 2));

  auto f4 = tensor(23 /* FLOAT4E2M1 */, {3});
  for (int v : {242, 5}) f4->add_int32_data(v);  // make_tensor(FLOAT4E2M1, [3], [1, -6, 0.5])
  CHECK(bytesOf(*f4) == std::string("\xf2\x05", 2));
}

TEST_CASE("malformed storage is a reason and never a crash") {
  auto shortPacked = tensor(TensorProto::INT4, {5});
  shortPacked->add_int32_data(1);  // 5 int4 need 3 bytes
  CHECK(failureOf(*shortPacked) == "int32_data holds 1 values, 5 int4 elements need 3 bytes");
  CHECK(qconv::ir::storageProblem(*shortPacked) == "holds 1 values, dims need 3");

  auto wide = tensor(TensorProto::UINT4, {2});
  wide->add_int32_data(256);  // not a byte
  CHECK(failureOf(*wide) == "int32_data value 256 is out of range for uint4");

  auto i8 = tensor(TensorProto::INT8, {1});
  i8->add_int32_data(200);
  CHECK(failureOf(*i8) == "int32_data value 200 is out of range for int8");

  auto raw = tensor(TensorProto::INT2, {9});  // 9 int2 need 3 bytes
  raw->set_raw_data(std::string(2, '\0'));
  CHECK(failureOf(*raw) == "raw data holds 2 bytes, dims need 3");

  auto str = tensor(TensorProto::STRING, {1});
  str->add_string_data("x");
  CHECK(failureOf(*str) == "a string tensor has no byte form qconv reads");

  auto f = tensor(TensorProto::FLOAT, {3});
  f->add_float_data(1.0f);
  CHECK(failureOf(*f) == "float_data holds 1 values, dims need 3");
}
