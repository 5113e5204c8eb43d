// What files a model's external data names, read off its serialized bytes without parsing it:
// the protobuf wire walked down every path on which a TensorProto can sit, each tensor's
// `external_data` entries read and its bytes skipped (only the pages holding message headers
// are touched). Used before anything is written, to know every file a run's inputs read
// (pipeline/write_plan.h), and by the commit, to know the data file of the model it replaces
// (io/output_pair.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qconv::io {

/// Every `location` value of an external_data entry of any tensor in the serialized ModelProto
/// data[0, size): initializers, sparse initializers, attribute tensors (t, tensors,
/// sparse_tensor(s)), subgraphs at any depth, model-local functions and training info. In the
/// order met, each once. Whatever the tensor's data_location says (a superset of what a reader
/// opens). A malformed model gives what could be read before the fault; never throws for it.
std::vector<std::string> externalLocations(const uint8_t* data, size_t size);

/// The same for the model file at `path`, mapped read-only; nothing when it is not a regular
/// file that can be opened and mapped. For an input: a file out of the page cache is read in
/// whole first, as the run reads all of it (io/mapped_file.h, readInCold).
std::vector<std::string> externalLocations(const std::string& path);
/// The same for the file `name` of the folder open as `dirfd` (a symbolic link is not followed).
std::vector<std::string> externalLocationsAt(int dirfd, const std::string& name);

}  // namespace qconv::io
