// The report's two views: the HTML page (--report FILE.html) and Model Explorer's node data
// (--node-data FILE.json). Both are made from the report object --report FILE.json writes
// (report.h), never from the model: one source of truth, so that the three cannot disagree.
//
// The page is report_page.html (compiled in: lib/CMakeLists.txt) with the object inlined as
// JSON; its script draws the table a page of rows at a time. What the object holds that differs
// from run to run (times) is left out: the same input and flags give the same bytes.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "qconv/pipeline/report.h"

namespace qconv {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kPage =
#include "qconv/report_page.inc"
    ;
constexpr std::string_view kDataMark = "/*QCONV_DATA*/";

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

/// The text of a page: JSON inside a script element, with every '<' escaped (a name holding
/// "</script>" cannot end it), and the bytes that are not UTF-8 replaced.
std::string inlineJson(const Json& data) {
  const std::string text = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

}  // namespace

bool wantsHtml(const std::string& path) {
  const size_t dot = path.find_last_of("./");
  if (dot == std::string::npos || path[dot] != '.') return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "html" || ext == "htm";
}

std::string reportPage(Json data) {
  Json styles = Json::array();
  for (const Style& s : kStyles) styles.push_back({{"name", s.name}, {"label", s.label}, {"color", s.color}});
  data["outcomes"] = std::move(styles);
  const size_t mark = kPage.find(kDataMark);
  std::string page;
  const std::string json = inlineJson(data);
  page.reserve(kPage.size() + json.size());
  page.append(kPage.substr(0, mark)).append(json).append(kPage.substr(mark + kDataMark.size()));
  return page;
}

std::string reportHtml(const RunReport& report) {
  Json data = reportObject(report);
  data.erase("ms");  // times differ from run to run; the page does not
  for (Json& item : data["items"]) item.erase("stages");
  return reportPage(std::move(data));
}

std::string nodeDataJson(const std::string& graph_id, const std::vector<NodeOverlay>& nodes) {
  Json results = Json::object();
  for (const NodeOverlay& n : nodes) {
    const std::string value = n.reason.empty() ? n.outcome : n.outcome + ": " + n.reason;
    results[n.id] = {{"value", value}, {"bgColor", colorOf(n.outcome)}, {"textColor", "#000000"}};
  }
  Json graph;
  graph["name"] = "qconv";
  graph["results"] = std::move(results);
  graph["thresholds"] = Json::array();
  graph["gradient"] = Json::array();
  graph["showExpandedSummaryOnGroupNode"] = true;  // a layer's box counts its nodes' outcomes
  graph["showLabelCountColumnsInChildrenStatsTable"] = true;
  Json j;
  j[graph_id] = std::move(graph);
  return jsonText(j);
}

std::string nodeDataJson(const ItemReport& item) {
  std::vector<NodeOverlay> nodes;
  nodes.reserve(item.trace.output.size());
  for (const OutputNode& n : item.trace.output) nodes.push_back({n.id, std::string(outcomeName(n.outcome)), n.reason});
  return nodeDataJson(item.graph_id, nodes);
}

}  // namespace qconv
