// External data: tensors whose bytes live in a file beside the model (TensorProto
// data_location EXTERNAL; external_data keys location, offset, length).
//
// Reading follows the ONNX security rules (../shared/notes/onnx-quant-spec.md, docs/cli.md):
// a location must be relative, without a ".." component, reached without following any
// symbolic link (each folder and the file are opened with O_NOFOLLOW below the model's own
// folder), a regular file with one hard link; offset and length lie inside the file and the
// length is what the tensor's type and dims need. A tensor is not read when it is resolved:
// it keeps data_location EXTERNAL, and its external_data is rewritten to the canonical
// entries plus the open file's descriptor (key ir::kFdKey), which ir::readFloats / readInts and
// the writer use. Only import writes that key, after dropping whatever the model had.
#pragma once

#include <onnx/onnx_pb.h>

#include "qconv/ir/tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qconv::io {

/// Offsets of tensors in an external data file qconv writes are multiples of this (mmap).
inline constexpr uint64_t kExternalAlignment = 4096;
/// Tensors of at least this many bytes go to the data file when qconv writes external data
/// (onnx.external_data_helper's default threshold).
inline constexpr uint64_t kExternalThreshold = 1024;

/// The files the tensors of one model read from: its external data files, and the model file
/// itself for the initializers the reader left there (io/splice.h). Closes them when destroyed.
class ExternalFiles {
 public:
  explicit ExternalFiles(std::string modelPath);
  ~ExternalFiles();
  ExternalFiles(const ExternalFiles&) = delete;
  ExternalFiles& operator=(const ExternalFiles&) = delete;

  /// Keep the model file open (and close it when destroyed): its bytes back tensors.
  void adoptModelFile(int fd);

  /// Make `t` read [offset, offset + length) of the model file (adoptModelFile): the canonical
  /// entries with ir::kFdKey, without a location. Only for a range the reader took from the file.
  void pointIntoModelFile(onnx::TensorProto& t, uint64_t offset, uint64_t length) const;

  /// Check `t`'s external reference and open its file; rewrite its external_data to the
  /// canonical form with ir::kFdKey. Throws Error(BadInput) naming the model file and `where`.
  void resolve(onnx::TensorProto& t, const std::string& where);

  /// (device, inode) of every data file opened: the writer must not replace one of them.
  const std::vector<std::pair<uint64_t, uint64_t>>& identities() const { return ids_; }

 private:
  int openBelowModelDir(const std::string& location, const std::string& where);

  std::string modelPath_;
  int dirfd_ = -1;
  int modelFd_ = -1;
  std::map<std::string, int> fds_;  // location -> fd
  std::vector<std::pair<uint64_t, uint64_t>> ids_;
};

}  // namespace qconv::io
