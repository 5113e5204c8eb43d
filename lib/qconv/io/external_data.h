// External data: tensors whose bytes live in a file beside the model (TensorProto
// data_location EXTERNAL; external_data keys location, offset, length).
//
// Reading follows the ONNX security rules (../shared/notes/onnx-quant-spec.md, docs/cli.md):
// a location must be relative, without a ".." component, reached without following any
// symbolic link (each folder and the file are opened with O_NOFOLLOW below the model's own
// folder), a regular file with one hard link; offset and length lie inside the file and the
// length is what the tensor's type and dims need. A tensor is not read when it is resolved:
// it keeps data_location EXTERNAL with the canonical entries, and its bytes become a span of
// ExternalFiles, the ir::ByteSource the IR reads them through (ir::FileBytes on the value).
// Descriptors stay here: the emitted model's file-backed tensors are listed, with the file
// range each one's bytes are in, in a FileBacked table for the writer and the checker.
#pragma once

#include <onnx/onnx_pb.h>

#include "qconv/diag.h"
#include "qconv/io/content_hash.h"
#include "qconv/io/mapped_file.h"
#include "qconv/io/temp_file.h"
#include "qconv/io/write_queue.h"
#include "qconv/ir/tensor.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace qconv::io {

/// Error(BadInput): `path` shrank while qconv read it (io::MappedFile, pread); nothing is written.
Error changedWhileRead(const std::string& path);

/// Offsets of tensors in an external data file qconv writes are multiples of this (mmap).
inline constexpr uint64_t kExternalAlignment = 4096;
/// Tensors of at least this many bytes go to the data file when qconv writes external data
/// (onnx.external_data_helper's default threshold).
inline constexpr uint64_t kExternalThreshold = 1024;

/// Where a file-backed tensor's bytes are: `length` bytes at `offset` of the open file `fd`.
struct FileRange {
  int fd = -1;
  uint64_t offset = 0, length = 0;
  bool data_file = false;             // an external data file the model named (not the model file)
  const char* memory = nullptr;       // the bytes mapped in this process (ExternalFiles::view), or null
  const std::string* what = nullptr;  // "<model>: initializer 'w' (bytes in 'w.data')", for messages
};

/// The file-backed tensors of an emitted model (exportModel), by address in that model: what the
/// writer copies range by range and the checker is shown a stand-in for. Valid while the model
/// is and its ExternalFiles are.
using FileBacked = std::unordered_map<const onnx::TensorProto*, FileRange>;

/// The range of `t` when `file_backed` lists it, else null.
inline const FileRange* findRange(const FileBacked* file_backed, const onnx::TensorProto& t) {
  if (!file_backed) return nullptr;
  auto it = file_backed->find(&t);
  return it == file_backed->end() ? nullptr : &it->second;
}

/// What ExternalFiles::keep wrote: the large tensors passes made, one after another at offsets
/// aligned as the writer aligns them (kExternalAlignment), hashed as they went in. When it was
/// made beside the output (ExternalFiles::keepBeside), the writer takes it as the start of the
/// output's data file if every tensor in it is still in the model, instead of copying them.
struct KeptFile {
  std::unique_ptr<TempFile> file;
  uint64_t end = 0;      // where the last tensor ends
  uint64_t tensors = 0;  // the bytes of all the tensors kept
  ContentHash hash;      // of bytes [0, end), the gaps as the zeros they read as
  bool beside_output = false;
};

/// The files the tensors of one model read from: its external data files, and the model file
/// itself for the initializers the reader left there (io/splice.h). Closes them when destroyed.
class ExternalFiles : public ir::ByteSource, public ir::ByteKeeper {
 public:
  /// `viewWindow`: the mapped bytes view() holds at most (kViewWindow; tests set less).
  explicit ExternalFiles(std::string modelPath, uint64_t viewWindow = kViewWindow);
  ~ExternalFiles() override;
  ExternalFiles(const ExternalFiles&) = delete;
  ExternalFiles& operator=(const ExternalFiles&) = delete;

  /// Keep the model file open (and close it when destroyed): its bytes back tensors. `map`, when
  /// given: the reader's mapping of it, kept as the one view() reads through, so that the pages
  /// the parse mapped are not mapped again (a file within the view window: io::openModel).
  void adoptModelFile(int fd, std::unique_ptr<MappedFile> map = nullptr);
  /// The model's folder, opened once by the reader (closed when destroyed): every data file is
  /// opened relative to it, never by the folder's path again. Without it, the folder is opened
  /// by path when the first data file is.
  void adoptFolder(int dirfd);
  /// The model's folder as adoptFolder got it, or -1.
  int folderFd() const { return dirfd_; }
  /// (device, inode) of the model file read, or (0, 0).
  void setModelIdentity(uint64_t dev, uint64_t ino) { modelId_ = {dev, ino}; }
  std::pair<uint64_t, uint64_t> modelIdentity() const { return modelId_; }

  /// Throws changedWhileRead naming the file when a file whose bytes were read, or are still to
  /// be copied, is now shorter than the tensors in it, or shrank while a view of it was read (its
  /// pages read as zeros: io::MappedFile). Called before anything read is committed.
  void checkUnchanged() const;

  /// Make `t` a file-backed tensor whose bytes are [offset, offset + length) of the model file
  /// (adoptModelFile): EXTERNAL, with offset and length and no location. Only for a range the
  /// reader took from the file.
  ir::FileBytes pointIntoModelFile(onnx::TensorProto& t, uint64_t offset, uint64_t length);

  /// Check `t`'s external reference and open its file; rewrite its external_data to the
  /// canonical form. Throws Error(BadInput) naming the model file and `where`.
  ir::FileBytes resolve(onnx::TensorProto& t, const std::string& where);

  /// resolve, then read the bytes into `t`: an inline tensor again.
  void inlineBytes(onnx::TensorProto& t, const std::string& where);

  void read(uint32_t span, uint64_t at, uint64_t n, char* out) const override;

  /// ir::ByteSource::view, from a read-only mapping of the span's file (io::MappedFile, one per
  /// file, made on first use; nullptr for keep()'s tensors, or a file that cannot be mapped or
  /// is now shorter). The pages a view maps stay mapped, so that the writer writes the bytes a pass
  /// read from them (range() says so) instead of reading them again, up to kViewWindow bytes:
  /// past it the oldest tensors' pages leave this process's memory, and a tensor larger than
  /// the window keeps only the window behind where it is read (its bytes are then copied in
  /// the kernel as before). A file shorter than its tensors gets no view (read() says what is
  /// wrong); the writer writes from a mapping in the kernel, where a file shortened since is an
  /// error it reports. A file shortened while a pass reads its view reads as zeros there, and
  /// checkUnchanged() reports it before the output is committed.
  const char* view(uint32_t span, uint64_t at, uint64_t n) const override;
  std::optional<unsigned> writtenFloatFlaws(uint32_t span) const override;
  static constexpr uint64_t kViewWindow = uint64_t{32} << 20;  // a ResNet-50's weights

  /// ir::ByteKeeper: `bytes` appended to a temporary file (io::TempFile: unnamed where the file
  /// system can; in $TMPDIR or /tmp, or beside the output after keepBeside), `t` file-backed by
  /// them. Throws Error(Output) when the file cannot be written.
  /// The bytes are written and hashed on a thread of their own (WriteQueue, up to 64 MiB in
  /// flight) while the caller goes on; read, range and kept() wait for them.
  ir::FileBytes keep(onnx::TensorProto& t, std::string bytes) override;
  ir::FileBytes keepPieces(onnx::TensorProto& t, uint64_t length, const std::function<void(std::string&)>& next) override;

  std::string buffer(size_t n) override;
  void recycle(std::string bytes) override;

  /// Make keep()'s file beside `output`, as its data file to be (KeptFile): before the passes,
  /// when the output will have external data.
  void keepBeside(const std::string& output, std::shared_ptr<const Folder> folder = nullptr);

  /// What keep() wrote, or null when it wrote nothing. The writer may take its file.
  KeptFile* kept() {
    awaitKept();
    return kept_.file ? &kept_ : nullptr;
  }

  /// The file range of `bytes`, which this made.
  FileRange range(const ir::FileBytes& bytes) const;

  /// (device, inode) of every data file opened: the writer must not replace one of them.
  const std::vector<std::pair<uint64_t, uint64_t>>& identities() const { return ids_; }

 private:
  /// Wait for keep()'s write in flight; rethrow what it threw.
  void awaitKept() const;
  int openBelowModelDir(const std::string& location, const std::string& where);
  ir::FileBytes addSpan(onnx::TensorProto& t, std::initializer_list<std::pair<const char*, std::string>> entries,
                        int fd, uint64_t offset, uint64_t length, bool data_file, std::string what);

  struct Span {
    int fd;
    uint64_t offset, length;
    bool data_file;
    std::string what;
    bool made = false;  // keep()'s: read only once its write is done
    // keep()'s float32 tensors: the scaleFlaws of the values written, or'ed by the writes
    // (kFlawsUnknown: a piece that was not whole values)
    std::shared_ptr<std::atomic<unsigned>> flaws;
  };
  static constexpr unsigned kFlawsUnknown = 1u << 31;  // beside scaleFlaws' bits
  struct Held {
    uint64_t from = 0, to = 0;  // view(): a span's bytes [from, to) held mapped
  };
  struct Mapping {
    std::unique_ptr<MappedFile> file;
    const char* data = nullptr;  // null: the file cannot be mapped
    uint64_t size = 0;
  };
  const Mapping& mapping(int fd) const;
  std::pair<uint64_t, uint64_t> modelId_{0, 0};
  void letGo(uint32_t span, uint64_t upto) const;  // view(): the span's [from, upto) leaves memory
  mutable std::map<int, Mapping> maps_;      // fd -> the file mapped (view)
  mutable std::vector<Held> held_;           // by span
  mutable std::deque<uint32_t> holding_;     // the spans holding mapped bytes, oldest first
  mutable uint64_t heldBytes_ = 0;
  uint64_t viewWindow_;
  std::vector<Span> spans_;
  std::string modelPath_;
  int dirfd_ = -1;
  int modelFd_ = -1;
  KeptFile kept_;           // keep()'s
  std::unique_ptr<WriteQueue> keeping_;  // keep()'s writes
  std::mutex sparesMutex_;               // keep()'s writes recycle on their own thread
  std::vector<std::string> spares_;      // buffer()'s, at most kSpares
  /// keep and keepPieces: the bytes `next` gives, written on the keeper's thread (`streamed`:
  /// at most 4 MiB of them in flight, else the queue's 64 MiB).
  ir::FileBytes keepIn(onnx::TensorProto& t, uint64_t length, const std::function<void(std::string&)>& next, bool streamed);
  std::string keptOutput_;  // keepBeside's
  std::shared_ptr<const Folder> keptFolder_;  // its folder, as the write plan opened it (or null)
  std::map<std::string, int> fds_;  // location -> fd
  std::vector<std::pair<uint64_t, uint64_t>> ids_;
};

}  // namespace qconv::io
