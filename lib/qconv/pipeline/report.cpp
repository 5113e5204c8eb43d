#include "qconv/pipeline/report.h"

#include <nlohmann/json.hpp>

namespace qconv {

namespace {

using Json = nlohmann::ordered_json;  // keys in the order written: a stable, readable file

Json said(const std::vector<Said>& all, std::initializer_list<Report> kinds) {
  Json list = Json::array();
  for (const Said& s : all)
    if (std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end())
      list.push_back({{"pass", s.pass}, {"node", s.subject}, {"kind", reportKindName(s.kind)}, {"reason", s.text}});
  return list;
}

}  // namespace

Json itemJson(const ItemReport& r) {
  Json j;
  j["input"] = r.input;
  j["output"] = r.output;
  j["data_file"] = r.data_file.empty() ? Json() : Json(r.data_file);
  j["exit_code"] = r.exit_code;
  j["error"] = r.error.empty() ? Json() : Json(r.error);
  j["error_node"] = r.error_node.empty() ? Json() : Json(r.error_node);
  j["summary"] = r.summary.empty() ? Json() : Json(r.summary);
  j["dialects"] = r.dialects;
  j["quantized_tensors"] = r.quantized_tensors;
  Json groups = Json::array();
  for (const Rewritten& g : r.rewritten)
    groups.push_back({{"pass", g.pass}, {"node", g.node}, {"op", g.op}, {"kept", g.kept}, {"became", g.became},
                      {"absorbed", g.absorbed}});
  j["rewritten"] = std::move(groups);
  j["refusals"] = said(r.said, {Report::Refused, Report::Unconvertible});
  Json approximations = Json::array();
  for (const Said& s : r.said)
    if (s.kind == Report::Approximation) approximations.push_back({{"pass", s.pass}, {"node", s.subject}, {"what", s.text}});
  j["approximations"] = std::move(approximations);
  j["warnings"] = said(r.said, {Report::Warning, Report::Advisory});
  j["notes"] = said(r.said, {Report::Done});
  Json nodes = Json::array();
  for (const NodeRow& n : r.trace.input)
    nodes.push_back({{"name", n.name}, {"op", n.op}, {"outcome", outcomeName(n.outcome)}, {"passes", n.passes},
                     {"reason", n.reason}, {"became", n.became}});
  j["nodes"] = std::move(nodes);
  j["graph"] = r.graph_id.empty() ? Json() : Json(r.graph_id);
  Json outputs = Json::array();
  for (const OutputNode& n : r.trace.output)
    outputs.push_back({{"id", n.id}, {"op", n.op}, {"outcome", outcomeName(n.outcome)}, {"reason", n.reason},
                       {"from", n.from}});
  j["output_nodes"] = std::move(outputs);
  Json counts = Json::object();
  for (const auto& [what, n] : r.counts) counts[what] = n;
  j["counts"] = std::move(counts);
  Json stages = Json::array();
  for (const StageTiming& t : r.stages) stages.push_back({{"name", t.name}, {"ms", t.milliseconds}});
  j["stages"] = std::move(stages);
  return j;
}

std::string jsonText(const Json& j) {
  // names in a model need not be UTF-8: invalid bytes become U+FFFD rather than an exception
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json reportObject(const RunReport& report) {
  Json j;
  j["qconv_report"] = 1;  // the schema's version: a key changes meaning only with it
  j["command"] = "convert";
  j["format"] = report.format;
  j["target"] = report.target.empty() ? nlohmann::json() : nlohmann::json(report.target);
  j["exit_code"] = report.exit_code;
  j["ms"] = report.milliseconds;
  Json items = Json::array();
  for (const ItemReport& r : report.items) items.push_back(itemJson(r));
  j["items"] = std::move(items);
  return j;
}

std::string reportJson(const RunReport& report) { return jsonText(reportObject(report)); }

}  // namespace qconv
