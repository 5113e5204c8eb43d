// Model I/O: the parse and emit stages of the pipeline, and the files around them.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <atomic>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qconv/io/external_data.h"
#include "qconv/io/splice.h"
#include "qconv/ir/ir.h"

namespace qconv::io {

class ExternalFiles;
class Folder;
class OpSchemas;

/// Read and parse all of `path` (mapped in chunks, never modified; peak memory is the parsed
/// model plus 16 MiB). Throws Error(BadInput) naming the file when it cannot be read or is not
/// an ONNX model.
onnx::ModelProto readModelFile(const std::string& path);

/// A model read with its large initializers' bytes left in the file (io/splice.h): `files`
/// holds the file open for them.
struct InputModel {
  onnx::ModelProto proto;
  std::vector<TensorSpan> spans;
  std::shared_ptr<ExternalFiles> files;
};

/// Read `path` as readModelFile does, the bytes of large initializers aside: they stay in the
/// file, and only the pages around them are touched. Same errors. The model's folder is opened
/// once, and the model file and its data files are opened in it; `folder`: that folder already
/// open (another InputModel's, ExternalFiles::folderFd(): a second read of the same model from
/// the same folder), duplicated here; -1: opened from the path.
InputModel openModel(const std::string& path, int folder = -1);

/// A model given as its serialized bytes (the Python API's in-memory form), `name` standing for
/// it in messages: parsed as openModel parses a file, every tensor in memory (no files). Throws
/// Error(BadInput) when the bytes are no ONNX model, Error(Usage) when a tensor names external
/// data (a file the bytes cannot say where to find: the path form reads it).
InputModel parseModel(std::string_view bytes, const std::string& name);

/// parse: ModelProto -> IR. Tensor bytes move, they are not copied; the spans' initializers and
/// the external ones become file-backed (ir::Value::fileBytes, read through input.files). Throws Error(BadInput) for a broken graph (dangling
/// or duplicate names, nodes out of order, a bad external reference), Error(Unsupported) for a
/// construct qconv does not convert yet, each naming file and node.
ir::Model importModel(InputModel input, const std::string& path);
inline ir::Model importModel(onnx::ModelProto proto, const std::string& path) {
  return importModel(InputModel{std::move(proto), {}, nullptr}, path);
}

/// emit: IR -> ModelProto. Consumes the model's tensors and protos. Names generated values,
/// sets opset_import and ir_version to what the emitted ops need. A file-backed initializer
/// stays so, listed in `file_backed`, when it is given; otherwise its bytes are read into the
/// model (an I/O failure throws Error(BadInput)). `untyped`, when given, gets the name and the
/// element type qconv knows of each node output the model declares nothing of (qconv::
/// declareValueTypes declares them).
using ValueTypes = std::vector<std::pair<std::string, int32_t>>;
onnx::ModelProto exportModel(ir::Model& model, FileBacked* file_backed = nullptr, ValueTypes* untyped = nullptr);

/// Run the ONNX checker. Returns an empty string when the model passes, else the checker's
/// message. Each file-backed initializer (listed in `file_backed`) and each one stored
/// externally is shown to it as external data it does not open, whose bytes and length import
/// checked; the model is put back as it was before this returns.
/// The checker reads its operator schemas from `schemas` (a batch shares one), else from an
/// OpSchemas of its own; never from libonnx's registry, which would build all of them.
std::string checkModel(onnx::ModelProto& model, const FileBacked* file_backed = nullptr,
                       const OpSchemas* schemas = nullptr);

/// A path's folder ("." when it names none, "/" for the root) and its last component (empty
/// when the path ends with a slash).
struct PathParts {
  std::string dir, base;
  /// Whether `base` can name a file: not empty, ".", or "..".
  bool namesFile() const { return !base.empty() && base != "." && base != ".."; }
};
PathParts splitPath(const std::string& path);

struct WriteOptions {
  /// Write tensors of at least kExternalThreshold bytes to a data file beside the output
  /// (dataFileName; offsets aligned to kExternalAlignment); otherwise every tensor goes into the
  /// model (refused when that passes protobuf's 2 GB limit).
  bool external_data = false;
  /// (device, inode) of files that must not be replaced or removed, sorted: every input of the
  /// run and the files their external data names (pipeline/write_plan.h).
  std::vector<std::pair<uint64_t, uint64_t>> protected_files;
  /// Whether (dev, ino) is one of protected_files.
  bool protects(uint64_t dev, uint64_t ino) const {
    return std::binary_search(protected_files.begin(), protected_files.end(), std::make_pair(dev, ino));
  }
  /// Flush the files to disk before renaming them into place, and the folder after: the result
  /// then survives a power loss too. Without it the write is still atomic for every reader and
  /// against the process dying (temporary file + rename), as onnx.save and onnxruntime are not.
  bool durable = false;
  /// The model's file-backed tensors (exportModel), copied from their files.
  const FileBacked* file_backed = nullptr;
  /// The tensors the passes made, in a file beside this output (KeptFile::beside_output): the
  /// data file starts as that file when every tensor in it is still in the model (taken, not
  /// copied). Null, or made elsewhere: copied as the other file-backed tensors are.
  KeptFile* kept = nullptr;
  /// A batch's: commit() holds it shared, and the batch takes it exclusive before it dies of a
  /// signal, so that no conversion of the batch is between its renames then (a lone run blocks
  /// the signals instead, as each commit does here too, but a batch has several threads).
  std::shared_mutex* commit_gate = nullptr;
  /// The names in the output's folder the commit may sweep (isSweptName), when the caller listed
  /// the folder already: a batch lists it once, not once per output (which would make a batch
  /// of n outputs cost n^2). Null: commit() lists the folder itself.
  const std::vector<std::string>* data_file_names = nullptr;
  /// The output's folder, opened once by the write plan (pipeline/write_plan.h): the write and
  /// its commit happen there, relative to its descriptor. Null: writeTemporary opens it.
  std::shared_ptr<const Folder> folder;
  /// Where the bytes written are counted as they go (a progress line: pipeline/progress.h), or null.
  std::atomic<uint64_t>* written = nullptr;
  /// What the write will write in all, added to as each file is sized, or null.
  std::atomic<uint64_t>* to_write = nullptr;
  /// The caller's cancel flag (ConvertOptions::cancel), read as each piece is written, or null.
  const std::atomic<bool>* cancel = nullptr;
};

class TempFile;

/// The name of OUT's data file: `<OUT's file name>.<16 hex digits>.data`, the digits a hash of
/// the file's bytes (io/content_hash.h). A new content is a new file, never an old one
/// rewritten: the model names its own data, and the same bytes give the same name (the output
/// stays deterministic).
std::string dataFileName(const std::string& base, uint64_t hash);
/// Whether `name` is one of dataFileName(base, ...).
bool isDataFileName(const std::string& base, const std::string& name);
/// The output file name whose data file `name` is (dataFileName's `base`), or empty when it is
/// none's.
std::string dataFileOwner(const std::string& name);
/// Whether the file at `path` is a data file qconv wrote: a regular file named as one
/// (dataFileName) whose bytes hash to the tag in its name. Only such data files are swept.
bool tagMatches(const std::string& path);
/// The same for `name` in `folder`.
bool tagMatchesIn(const Folder& folder, const std::string& name);
/// Whether the commit of output `base` may sweep `name` from its folder (io/output_pair.cpp):
/// one of its data files, or a temporary a killed commit of it left (temp_file.h).
bool isSweptName(const std::string& base, const std::string& name);
/// The output file names whose commit may sweep `name` (none, one, or two: `.a.data.qconv-1-0`
/// is a temporary of output a's data file or of output a.data).
std::vector<std::string> sweptNameOwners(const std::string& name);

/// An output written to temporary files beside its path and not yet in place. commit() puts it
/// there as a pair: under an exclusive lock on the folder (flock, shared by every qconv writing
/// there) it renames the data file in (its content-named file: the old model's data is not
/// touched), then the model over OUT, then removes the data files of OUT that the new model
/// does not name (what earlier outputs left; never a protected file). At every instant OUT and
/// the data it names are a pair, old or new; a failed model rename removes the data file it
/// brought in. Dropped uncommitted, the temporaries are removed. Move-only.
class PendingWrite {
 public:
  PendingWrite(std::unique_ptr<TempFile> model, std::unique_ptr<TempFile> data, std::shared_ptr<const Folder> folder,
               std::string path, const WriteOptions& options);
  PendingWrite(PendingWrite&&) noexcept;
  PendingWrite& operator=(PendingWrite&&) = delete;
  ~PendingWrite();
  /// Throws Error(Output) naming the file.
  void commit();
  /// For tests of a failed commit: the data file goes in, then `between` runs (and may throw),
  /// then the model.
  void commit(const std::function<void()>& between);
  /// The path of the data file commit() brings in, or empty when all is in the model.
  std::string dataFile() const;

 private:
  std::unique_ptr<TempFile> model_, data_;
  std::shared_ptr<const Folder> folder_;
  std::string path_;
  WriteOptions options_;  // durable, protected_files
};

/// Write `text` to `path` whole or not at all (a temporary file renamed over it), as the
/// model is written. Throws Error(Output) naming the file.
/// `folder`: the file's folder, opened by the write plan (null: opened here).
void writeTextFile(const std::string& path, const std::string& text, std::shared_ptr<const Folder> folder = nullptr);

/// Serialize to temporary files beside `path` (the model, and its data file when tensors go
/// external): never a partial file, never a followed symlink, nothing written outside the
/// output's folder. File-backed tensors (the input's external data, and the initializers the
/// reader left in the input file) are copied range by range in the kernel, never held whole;
/// with every tensor inline they are spliced into the model (io::InlineModel).
/// Throws Error(Output) naming the file, Error(Usage) when an output would replace one of
/// `protected_files`, Error(Unsupported) when inlining passes 2 GB.
PendingWrite writeTemporary(onnx::ModelProto& model, const std::string& path, const WriteOptions& options);

/// The model serialized into memory with every tensor inline, byte for byte what writeTemporary
/// writes without external data (file-backed tensors, listed in `file_backed`, read from their
/// files). Throws Error(Unsupported) naming `name` when that passes protobuf's 2 GB limit (the
/// path form keeps large tensors in a data file), Error(BadInput) when a file cannot be read.
std::string serializeModel(onnx::ModelProto& model, const FileBacked* file_backed, const std::string& name);

/// writeTemporary, then commit.
void writeModel(onnx::ModelProto& model, const std::string& path, const WriteOptions& options);

/// writeModel with default options (everything inline): for tests and tools.
inline void writeModelAtomically(onnx::ModelProto model, const std::string& path) { writeModel(model, path, {}); }

/// Minimum IR version that a default-domain opset needs.
int64_t minIrVersionForOpset(int64_t opset);

/// What qconv was built with, for --version: "ONNX 1.23.2 (IR version 14, opsets up to 28),
/// protobuf 3.21.12".
std::string builtWith();

}  // namespace qconv::io
