// What one `qconv convert` did, kept for --report FILE.json (schema: docs/cli.md, "--report").
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "qconv/passes/pass.h"
#include "qconv/pipeline/pass_manager.h"

namespace qconv {

/// One conversion: a lone one, or an item of a batch.
struct ItemReport {
  std::string input;
  std::string output;
  std::string data_file;  // the output's data file, when it has one
  int exit_code = 0;
  std::string error;  // the diagnostic of a failed conversion (what stderr said), else empty
  std::string error_node;  // the node that diagnostic names (Error::node), where it names one
  std::string summary;  // the summary of the info line of a conversion done ("3 QLinearConv, ...")
  std::vector<std::string> dialects;  // what the input holds (analysis::contentsOf), as inspect and verify say
  size_t quantized_tensors = 0;
  std::vector<Said> said;
  std::vector<Rewritten> rewritten;
  std::map<std::string, int> counts;
  std::vector<StageTiming> stages;
};

struct RunReport {
  std::string format;  // "qop" or "qdq"
  std::string target;  // --target, or empty
  int exit_code = 0;
  double milliseconds = 0;  // the whole run
  std::vector<ItemReport> items;
};

/// The report as JSON text (nlohmann::json, keys in a fixed order, 2-space indent, a newline).
std::string reportJson(const RunReport& report);

/// One item of it, as a JSON object (inspect shows its dry run so).
nlohmann::ordered_json itemJson(const ItemReport& item);

/// JSON text as qconv writes it: 2-space indent, a newline, bytes that are not UTF-8 as U+FFFD.
std::string jsonText(const nlohmann::ordered_json& j);

}  // namespace qconv
