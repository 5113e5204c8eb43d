// What a run may write or remove, checked before anything is written: the rule that keeps what
// the user owns (docs/robustness.md, "What qconv writes and removes"), stated once.
//
// A run writes or removes, for each output OUT (a lone run's, or every item's of a batch):
//   OUT itself; its data file OUT.<16 hex>.data (a new name, or one already in OUT's folder);
//   the OUT.<16 hex>.data files already there, which the commit's sweep may remove; and the
//   hidden temporaries a killed commit left (.OUT.qconv-P-N, .OUT.data.qconv-P-N), which it
//   removes too;
// and the report (--report). A run reads every input, and every file an input's external data
// names (io::externalLocations: any tensor's `location`, whatever its data_location says).
//
// The rule: each of those paths is resolved, before the first byte is written, to the file it
// names, as (device, inode) where it exists (both the entry itself and what a symbolic link
// there leads to) and as (its folder's device and inode, its name) where it does not. The run
// is refused with exit 2, writing nothing, when a path it writes or removes is a file any item
// reads, or when the report is one of the paths the conversions write or remove. (A file only
// named like a data file, whose bytes do not hash to its tag, is one the sweep never removes
// (io::tagMatches), so it is no path the run removes.) The files
// every item reads stay protected (io::WriteOptions::protected_files) in every commit of the run.
// Each output's folder is opened once, here, and the outputs are resolved through it; the write
// and its commit then happen in that open folder (openat, linkat, renameat, unlinkat on its
// descriptor), so the checks hold for the rename itself: a folder replaced by a symbolic link to
// another during the run does not move the output there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qconv/io/temp_file.h"
#include "qconv/pipeline/run.h"

namespace qconv {

struct WritePlan {
  /// (device, inode) of every input and every file an input's external data names, sorted:
  /// what no commit of the run may replace or remove (io::WriteOptions::protected_files).
  std::vector<std::pair<uint64_t, uint64_t>> protected_files;
  /// For each output, the names in its folder the commit's sweep may remove (data files and
  /// leftover temporaries of that output), from one listing per folder.
  std::vector<std::vector<std::string>> sweep_names;
  /// For each output, its folder, opened once when the plan checked it (io::Folder): the write
  /// and its commit happen there, so that the checks above bind the final rename. Null where
  /// the folder could not be opened (the write then fails, naming why).
  std::vector<std::shared_ptr<const io::Folder>> folders;
  /// The report's folder, the same way; the node data's (--node-data).
  std::shared_ptr<const io::Folder> report_folder;
  std::shared_ptr<const io::Folder> node_data_folder;
};

/// The plan for `outputs[i]` written from `inputs[i]` (and `report` and `node_data`, when not
/// empty); throws Error(Usage) naming both paths when the rule above refuses the run.
WritePlan planWrites(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                     const std::string& report, const std::string& node_data = "");

}  // namespace qconv
