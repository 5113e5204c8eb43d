// The report's two views: the HTML page (--report FILE.html) and Model Explorer's node data
// (--node-data FILE.json). Both are made from the report object --report FILE.json writes
// (report.h), never from the model: one source of truth, so that the three cannot disagree.
//
// The page is report_page.html (compiled in: lib/CMakeLists.txt) with the object inlined as
// JSON; its script draws the table a page of rows at a time. What the object holds that differs
// from run to run (times) is left out: the same input and flags give the same bytes.
#include <algorithm>
#include <cctype>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qconv/pipeline/json_writer.h"
#include "qconv/pipeline/report.h"

namespace qconv {

namespace {

constexpr std::string_view kPage =
#include "qconv/report_page.inc"
    ;
constexpr std::string_view kDataMark = "/*QCONV_DATA*/";
constexpr std::string_view kOutcomesMark = "/*QCONV_OUTCOMES*/";

/// How each outcome looks, on the page and in Model Explorer: convert's (node_trace.h), then
/// verify's (a node's worst finding).
struct Style {
  std::string_view name, label, color;
};
constexpr Style kStyles[] = {
    {"fused", "fused", "#2da44e"},
    {"rewritten", "rewritten", "#218bff"},
    {"moved", "moved", "#8250df"},
    {"approximated", "approximated", "#fb8c00"},
    {"refused", "refused", "#d4a72c"},
    {"will-not-run", "will not run", "#cf222e"},
    {"left", "left as it was", "#afb8c1"},
    {"removed", "removed", "#d0d7de"},
    {"error", "error", "#cf222e"},
    {"warning", "warning", "#d4a72c"},
    {"note", "note", "#54aeff"},
    {"ok", "no finding", "#2da44e"},
};

std::string_view colorOf(std::string_view outcome) {
  for (const Style& s : kStyles)
    if (s.name == outcome) return s.color;
  return "#afb8c1";
}

/// JSON text inside a script element: every '<' escaped, so that a name holding "</script>"
/// cannot end it.
void appendScriptJson(std::string& page, std::string_view json) {
  size_t from = 0;
  for (size_t at = json.find('<'); at != std::string_view::npos; at = json.find('<', from)) {
    page.append(json.substr(from, at - from)).append("\\u003c");
    from = at + 1;
  }
  page.append(json.substr(from));
}

}  // namespace

bool wantsHtml(const std::string& path) {
  const size_t dot = path.find_last_of("./");
  if (dot == std::string::npos || path[dot] != '.') return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "html" || ext == "htm";
}

std::string reportPage(std::string_view data) {
  JsonWriter styles(0);
  styles.beginArray();
  for (const Style& s : kStyles) {
    styles.beginObject();
    styles.field("name", s.name);
    styles.field("label", s.label);
    styles.field("color", s.color);
    styles.endObject();
  }
  styles.endArray();
  const std::string outcomes = styles.take();
  const size_t data_at = kPage.find(kDataMark), outcomes_at = kPage.find(kOutcomesMark);
  std::string page;
  page.reserve(kPage.size() + data.size() + outcomes.size() + data.size() / 64);
  page.append(kPage.substr(0, data_at));
  appendScriptJson(page, data);
  page.append(kPage.substr(data_at + kDataMark.size(), outcomes_at - data_at - kDataMark.size()));
  page.append(outcomes);
  page.append(kPage.substr(outcomes_at + kOutcomesMark.size()));
  return page;
}

std::string reportHtml(const RunReport& report) { return reportPage(reportData(report)); }

std::string nodeDataJson(const std::string& graph_id, const std::vector<NodeOverlay>& nodes) {
  JsonWriter w(2);
  w.beginObject();
  w.key(graph_id);
  w.beginObject();
  w.field("name", "qconv");
  w.key("results");
  w.beginObject();
  std::string value;
  for (const NodeOverlay& n : nodes) {
    value.assign(n.outcome);
    if (!n.reason.empty()) value.append(": ").append(n.reason);
    w.key(n.id);
    w.beginObject();
    w.field("value", value);
    w.field("bgColor", colorOf(n.outcome));
    w.field("textColor", "#000000");
    w.endObject();
  }
  w.endObject();
  w.key("thresholds");
  w.beginArray();
  w.endArray();
  w.key("gradient");
  w.beginArray();
  w.endArray();
  w.field("showExpandedSummaryOnGroupNode", true);  // a layer's box counts its nodes' outcomes
  w.field("showLabelCountColumnsInChildrenStatsTable", true);
  w.endObject();
  w.endObject();
  return w.take();
}

std::string nodeDataJson(const ItemReport& item) {
  std::vector<NodeOverlay> nodes;
  nodes.reserve(item.trace.output.size());
  for (const OutputNode& n : item.trace.output) nodes.push_back({n.id, std::string(outcomeName(n.outcome)), n.reason});
  return nodeDataJson(item.graph_id, nodes);
}

std::string nodeDataFromReport(std::string_view report_json) {
  const auto j = nlohmann::json::parse(report_json.begin(), report_json.end(), nullptr, false);
  if (j.is_discarded() || !j.contains("items") || j["items"].size() != 1) return {};
  const auto& item = j["items"][0];
  if (!item.contains("graph") || !item["graph"].is_string() || item["output_nodes"].empty()) return {};
  std::vector<NodeOverlay> nodes;
  for (const auto& n : item["output_nodes"])
    nodes.push_back({n["id"].get<std::string>(), n["outcome"].get<std::string>(), n["reason"].get<std::string>()});
  return nodeDataJson(item["graph"].get<std::string>(), nodes);
}

}  // namespace qconv
