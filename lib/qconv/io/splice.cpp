#include "qconv/io/splice.h"

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <memory>
#include <optional>
#include <utility>

#include "qconv/diag.h"
#include "qconv/io/wire.h"
#include "qconv/ir/tensor.h"

namespace qconv::io {

namespace {

using google::protobuf::MessageLite;
using onnx::TensorProto;

constexpr uint32_t kGraphField = 7;        // ModelProto.graph
constexpr uint32_t kInitializerField = 5;  // GraphProto.initializer
constexpr uint32_t kRawDataField = 9;      // TensorProto.raw_data

// ---- reading ----

enum class Taken { kYes, kNo, kFailed };

/// Walks a serialized message's fields. Runs of fields are handed to protobuf, which merges
/// them into the message (a message parsed in pieces is the message parsed whole); the fields
/// a caller asks for are handed to it instead, in order.
class Walker {
 public:
  explicit Walker(const uint8_t* data) : data_(data) {}

  /// Walk [begin, end) of a message nested `depth` levels below the model: each
  /// length-delimited field `number` goes to `take`, after every field before it was merged.
  template <typename Take>
  bool walk(MessageLite& m, size_t begin, size_t end, int depth, uint32_t number, Take take) const {
    size_t run = begin;
    for (size_t pos = begin; pos < end;) {
      wire::Field f;
      if (!wire::readField(data_, end, pos, &f)) return false;
      pos = f.end;
      if (f.number != number || f.type != wire::kLen) continue;
      if (!merge(m, run, f.begin, depth)) return false;
      const Taken t = take(f);
      if (t == Taken::kFailed) return false;
      run = t == Taken::kYes ? f.end : f.begin;
    }
    return merge(m, run, end, depth);
  }

 private:
  bool merge(MessageLite& m, size_t begin, size_t end, int depth) const {
    if (begin == end) return true;
    google::protobuf::io::CodedInputStream in(data_ + begin, static_cast<int>(end - begin));
    in.SetRecursionLimit(kRecursionLimit - depth);
    return m.MergePartialFromCodedStream(&in) && in.ConsumedEntireMessage();
  }

  const uint8_t* data_;
};

/// Condition 2 and 3 of splice.h: an ordinary inline tensor whose dims need `length` bytes.
bool canStayInFile(const TensorProto& t, uint64_t length) {
  if (t.data_location() == TensorProto::EXTERNAL || t.external_data_size() || t.float_data_size() ||
      t.int32_data_size() || t.string_data_size() || t.int64_data_size() || t.double_data_size() ||
      t.uint64_data_size())
    return false;
  const auto bytes = ir::dataBytes(t);
  return bytes && *bytes == length;
}

}  // namespace

bool parseLeavingTensors(const uint8_t* data, size_t size, onnx::ModelProto* model, std::vector<TensorSpan>* spans,
                         uint64_t threshold, const std::function<void(size_t)>& consumed) {
  model->Clear();
  spans->clear();
  if (size > static_cast<size_t>(INT_MAX)) return false;
  const Walker w(data);

  auto tensor = [&](TensorProto& t, int index, const wire::Field& entry) {
    std::optional<std::pair<size_t, uint64_t>> raw;  // the last raw_data field, when large
    const bool ok = w.walk(t, entry.payload, entry.end, 2, kRawDataField, [&](const wire::Field& f) {
      if (f.end - f.payload < threshold) {  // protobuf reads it, and the last one wins
        raw.reset();
        return Taken::kNo;
      }
      t.clear_raw_data();
      raw.emplace(f.payload, f.end - f.payload);
      return Taken::kYes;
    });
    if (!ok) return false;
    if (raw && canStayInFile(t, raw->second)) spans->push_back({index, raw->first, raw->second});
    else if (raw) t.set_raw_data(reinterpret_cast<const char*>(data) + raw->first, raw->second);
    return true;
  };
  auto graph = [&](onnx::GraphProto& g, const wire::Field& entry) {
    return w.walk(g, entry.payload, entry.end, 1, kInitializerField, [&](const wire::Field& f) {
      TensorProto* t = g.add_initializer();
      if (!tensor(*t, g.initializer_size() - 1, f)) return Taken::kFailed;
      // the model's fields before the graph, the graph's before this tensor, and the tensor are
      // all merged: nothing before its end is read again
      if (consumed) consumed(f.end);
      return Taken::kYes;
    });
  };
  const bool ok = w.walk(*model, 0, size, 0, kGraphField, [&](const wire::Field& f) {
    return graph(*model->mutable_graph(), f) ? Taken::kYes : Taken::kFailed;
  });
  if (ok && model->IsInitialized()) return true;
  model->Clear();
  spans->clear();
  return false;
}

// ---- writing ----

namespace {

/// The first length-delimited field `number` in [begin, end) of a serialization protobuf made.
/// Known fields come in number order and unknown ones after them, so the walk never reaches an
/// unknown field (which might be a group) before the known field it looks for.
wire::Field findField(const std::string& bytes, size_t begin, size_t end, uint32_t number) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t pos = begin; pos < end;) {
    wire::Field f;
    QCONV_ASSERT(wire::readField(data, end, pos, &f), "unreadable field at byte {} of a serialized model", pos);
    if (f.number == number && f.type == wire::kLen) return f;
    pos = f.end;
  }
  QCONV_ASSERT(false, "serialized model has no field {} in [{}, {})", number, begin, end);
  return {};
}

}  // namespace

RawDataStandIn::RawDataStandIn(TensorProto& t, std::string raw)
    : t_(t), file_backed_(t.data_location() == TensorProto::EXTERNAL) {
  if (file_backed_) {
    external_.Swap(t.mutable_external_data());
    t.clear_data_location();
    t.set_raw_data(std::move(raw));
  } else {
    raw_ = std::move(raw);
    raw_.swap(*t.mutable_raw_data());
  }
}

RawDataStandIn::~RawDataStandIn() {
  if (!file_backed_) {
    raw_.swap(*t_.mutable_raw_data());
    return;
  }
  t_.clear_raw_data();
  t_.set_data_location(TensorProto::EXTERNAL);
  t_.mutable_external_data()->Swap(&external_);
}

InlineModel::InlineModel(onnx::ModelProto& model, uint64_t threshold, const FileBacked* file_backed) {
  struct Splice {
    int index;
    TensorProto* tensor;
    int fd;  // -1: in memory
    uint64_t from, size;
    const char* memory;  // the file's bytes where a view left them mapped, or null
  };
  std::vector<Splice> splices;
  // 1. The skeleton: each large initializer's raw_data emptied for the serialization, then
  //    everything put back as it was.
  {
    std::vector<std::unique_ptr<RawDataStandIn>> emptied;
    auto* inits = model.has_graph() ? model.mutable_graph()->mutable_initializer() : nullptr;
    for (int k = 0; inits && k < inits->size(); ++k) {
      TensorProto& t = *inits->Mutable(k);
      Splice s{k, &t, -1, 0, 0, nullptr};
      if (const FileRange* r = findRange(file_backed, t)) {
        s.fd = r->fd;
        s.from = r->offset;
        s.size = r->length;
        s.memory = r->memory;
        reads_data_files_ = reads_data_files_ || r->data_file;
      } else if (t.data_location() != TensorProto::EXTERNAL && t.has_raw_data() && t.raw_data().size() >= threshold) {
        s.size = t.raw_data().size();  // its bytes: raw_data once it is put back
      } else {
        continue;
      }
      // present and empty: protobuf writes the field's tag where the bytes go
      emptied.push_back(std::make_unique<RawDataStandIn>(t, std::string()));
      splices.push_back(s);
    }
    const size_t n = model.ByteSizeLong();
    if (n > static_cast<size_t>(INT_MAX)) {
      size_ = n;  // too large to write: say by how much, and make nothing
      for (const Splice& s : splices) size_ += s.size;
      return;
    }
    skeleton_.resize(n);
    model.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(skeleton_.data()));
  }

  auto piece = [&](std::vector<Piece>& out, Piece::Kind kind, uint64_t begin, uint64_t size) {
    if (size) out.push_back({kind, begin, size, nullptr, -1});
  };
  auto literal = [&](std::vector<Piece>& out, uint32_t field, uint64_t length) {
    const size_t at = literals_.size();
    wire::putVarint(literals_, wire::lenTag(field));
    wire::putVarint(literals_, length);
    piece(out, Piece::kLiteral, at, literals_.size() - at);
  };
  if (splices.empty()) {
    piece(pieces_, Piece::kSkeleton, 0, skeleton_.size());
    size_ = skeleton_.size();
    return;
  }

  // 2. The graph's pieces: each spliced initializer's length and raw_data rewritten.
  const wire::Field graph = findField(skeleton_, 0, skeleton_.size(), kGraphField);
  std::vector<Piece> inner;
  uint64_t graphSize = graph.end - graph.payload;
  size_t cursor = graph.payload, pos = graph.payload;
  int index = 0;
  for (const Splice& s : splices) {
    wire::Field entry;
    for (;; pos = entry.end) {  // the index-th initializer entry
      entry = findField(skeleton_, pos, graph.end, kInitializerField);
      if (index++ == s.index) break;
    }
    pos = entry.end;
    const wire::Field raw = findField(skeleton_, entry.payload, entry.end, kRawDataField);
    QCONV_ASSERT(raw.payload == raw.end, "initializer {}: its raw_data was not emptied", s.index);
    const uint64_t tensorSize = (entry.end - entry.payload) - (raw.end - raw.begin) +
                                wire::varintSize(wire::lenTag(kRawDataField)) + wire::varintSize(s.size) + s.size;
    piece(inner, Piece::kSkeleton, cursor, entry.begin - cursor);
    literal(inner, kInitializerField, tensorSize);
    piece(inner, Piece::kSkeleton, entry.payload, raw.begin - entry.payload);
    literal(inner, kRawDataField, s.size);
    if (s.memory) inner.push_back({Piece::kMapped, s.from, s.size, s.memory, s.fd});
    else if (s.fd >= 0) inner.push_back({Piece::kFile, s.from, s.size, nullptr, s.fd});
    else inner.push_back({Piece::kMemory, 0, s.size, s.tensor->raw_data().data(), -1});
    cursor = raw.end;
    graphSize += wire::varintSize(wire::lenTag(kInitializerField)) + wire::varintSize(tensorSize) + tensorSize -
                 (entry.end - entry.begin);
  }
  piece(inner, Piece::kSkeleton, cursor, graph.end - cursor);

  // 3. The model: the graph's length rewritten around them.
  piece(pieces_, Piece::kSkeleton, 0, graph.begin);
  literal(pieces_, kGraphField, graphSize);
  pieces_.insert(pieces_.end(), inner.begin(), inner.end());
  piece(pieces_, Piece::kSkeleton, graph.end, skeleton_.size() - graph.end);
  for (const Piece& p : pieces_) size_ += p.size;
}

void InlineModel::write(SpliceSink& sink) const {
  QCONV_ASSERT(size_ <= static_cast<uint64_t>(INT_MAX), "writing a model of {} bytes", size_);
  for (const Piece& p : pieces_) {
    switch (p.kind) {
      case Piece::kSkeleton: sink.bytes(skeleton_.data() + p.begin, p.size); break;
      case Piece::kLiteral: sink.bytes(literals_.data() + p.begin, p.size); break;
      case Piece::kMemory: sink.bytes(p.memory, p.size); break;
      case Piece::kFile: sink.fileRange(p.fd, p.begin, p.size); break;
      case Piece::kMapped: sink.mappedRange(p.memory, p.fd, p.begin, p.size); break;
    }
  }
}

}  // namespace qconv::io
