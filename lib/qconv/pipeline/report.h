// What one `qconv convert` did, kept for --report FILE.json (schema: docs/cli.md, "--report").
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "qconv/passes/pass.h"
#include "qconv/pipeline/node_trace.h"
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
  /// Each node's outcome (node_trace.h), when a report was asked for; the output's graph id.
  NodeTrace trace;
  std::string graph_id;
};

struct RunReport {
  std::string format;  // "qop" or "qdq"
  std::string target;  // --target, or empty
  int exit_code = 0;
  double milliseconds = 0;  // the whole run
  std::vector<ItemReport> items;
};

/// The report as JSON text (keys in a fixed order, 2-space indent and a newline, or with
/// `indent` 0 compact; json_writer.h).
std::string reportJson(const RunReport& report, int indent = 2);
/// The same object compact and without its times (which differ run to run): the page's data.
std::string reportData(const RunReport& report);

/// One item of it, as a JSON object (inspect shows its dry run so).
nlohmann::ordered_json itemJson(const ItemReport& item);

/// JSON text as qconv writes it: 2-space indent, a newline, bytes that are not UTF-8 as U+FFFD.
std::string jsonText(const nlohmann::ordered_json& j);

/// --report FILE.html: the report as one self-contained page (report_page.cpp).
std::string reportHtml(const RunReport& report);
/// A page of any command's report object, given as compact JSON text: "command", "items" (each
/// with "nodes": name, op, outcome, passes, reason, became), and for verify each item's "findings".
std::string reportPage(std::string_view data);
/// Whether a --report path asks for the page (.html, .htm) rather than JSON.
bool wantsHtml(const std::string& path);

/// One node of Model Explorer's node data: its id (node_trace.h's nodeId), outcome and reason.
struct NodeOverlay {
  std::string id;
  std::string outcome;
  std::string reason;
};
/// --node-data FILE.json: Model Explorer's node data for the graph `graph_id`: each node's
/// outcome as its colour, "outcome: reason" as its value.
std::string nodeDataJson(const std::string& graph_id, const std::vector<NodeOverlay>& nodes);
/// The node data of a conversion's output (its trace's output nodes).
std::string nodeDataJson(const ItemReport& item);
/// The same from the report's JSON text (reportJson's, of one conversion): the Python API's
/// result.node_data, made when it is asked for. Empty for a batch's or a failed run's report.
std::string nodeDataFromReport(std::string_view report_json);

/// One item of it, as a JSON object (inspect shows its dry run so).
nlohmann::ordered_json itemJson(const ItemReport& item);

/// JSON text as qconv writes it: 2-space indent, a newline, bytes that are not UTF-8 as U+FFFD.
std::string jsonText(const nlohmann::ordered_json& j);

}  // namespace qconv
