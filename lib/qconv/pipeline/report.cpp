#include "qconv/pipeline/report.h"

#include <nlohmann/json.hpp>

#include "qconv/pipeline/json_writer.h"

namespace qconv {

namespace {

void said(JsonWriter& w, const std::vector<Said>& all, std::initializer_list<Report> kinds) {
  w.beginArray();
  for (const Said& s : all) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) continue;
    w.beginObject();
    w.field("pass", s.pass);
    w.field("node", s.subject);
    w.field("kind", reportKindName(s.kind));
    w.field("reason", s.text);
    w.endObject();
  }
  w.endArray();
}

void nodes(JsonWriter& w, const NodeTrace& trace) {
  w.key("nodes");
  w.beginArray();
  for (const NodeRow& n : trace.input) {
    w.beginObject();
    w.field("name", n.name);
    w.field("op", n.op);
    w.field("outcome", outcomeName(n.outcome));
    w.field("passes", n.passes);
    w.field("reason", n.reason);
    w.fieldStrings("became", n.became);
    w.endObject();
  }
  w.endArray();
}

void outputNodes(JsonWriter& w, const NodeTrace& trace) {
  w.key("output_nodes");
  w.beginArray();
  for (const OutputNode& n : trace.output) {
    w.beginObject();
    w.field("id", n.id);
    w.field("op", n.op);
    w.field("outcome", outcomeName(n.outcome));
    w.field("reason", n.reason);
    w.fieldStrings("from", n.from);
    w.endObject();
  }
  w.endArray();
}

/// One item; `times`: its stage times too (the page leaves them out: they differ run to run).
void writeItem(JsonWriter& w, const ItemReport& r, bool times) {
  w.beginObject();
  w.field("input", r.input);
  w.field("output", r.output);
  w.fieldOrNull("data_file", r.data_file);
  w.field("exit_code", r.exit_code);
  w.fieldOrNull("error", r.error);
  w.fieldOrNull("error_node", r.error_node);
  w.fieldOrNull("summary", r.summary);
  w.fieldStrings("dialects", r.dialects);
  w.field("quantized_tensors", r.quantized_tensors);
  w.key("rewritten");
  w.beginArray();
  for (const Rewritten& g : r.rewritten) {
    w.beginObject();
    w.field("pass", g.pass);
    w.field("node", g.node);
    w.field("op", g.op);
    w.field("kept", g.kept);
    w.fieldStrings("became", g.became);
    w.fieldStrings("absorbed", g.absorbed);
    w.endObject();
  }
  w.endArray();
  w.key("refusals");
  said(w, r.said, {Report::Refused, Report::Unconvertible});
  w.key("approximations");
  w.beginArray();
  for (const Said& s : r.said) {
    if (s.kind != Report::Approximation) continue;
    w.beginObject();
    w.field("pass", s.pass);
    w.field("node", s.subject);
    w.field("what", s.text);
    w.endObject();
  }
  w.endArray();
  w.key("warnings");
  said(w, r.said, {Report::Warning, Report::Advisory});
  w.key("notes");
  said(w, r.said, {Report::Done});
  nodes(w, r.trace);
  w.fieldOrNull("graph", r.graph_id);
  outputNodes(w, r.trace);
  w.key("counts");
  w.beginObject();
  for (const auto& [what, n] : r.counts) {
    w.field(what, n);
  }
  w.endObject();
  if (times) {
    w.key("stages");
    w.beginArray();
    for (const StageTiming& t : r.stages) {
      w.beginObject();
      w.field("name", t.name);
      w.field("ms", t.milliseconds);
      w.endObject();
    }
    w.endArray();
  }
  w.endObject();
}

void writeReport(JsonWriter& w, const RunReport& report, bool times) {
  w.beginObject();
  w.field("qconv_report", 1);  // the schema's version: a key changes meaning only with it
  w.field("command", "convert");
  w.field("format", report.format);
  w.fieldOrNull("target", report.target);
  w.field("exit_code", report.exit_code);
  if (times) {
    w.field("ms", report.milliseconds);
  }
  w.key("items");
  w.beginArray();
  for (const ItemReport& r : report.items) writeItem(w, r, times);
  w.endArray();
  w.endObject();
}

}  // namespace

nlohmann::ordered_json itemJson(const ItemReport& r) {
  JsonWriter w(0);
  writeItem(w, r, true);
  return nlohmann::ordered_json::parse(w.take());
}

std::string jsonText(const nlohmann::ordered_json& j) {
  // names in a model need not be UTF-8: invalid bytes become U+FFFD rather than an exception
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string reportJson(const RunReport& report, int indent) {
  JsonWriter w(indent);
  writeReport(w, report, true);
  return w.take();
}

std::string reportData(const RunReport& report) {
  JsonWriter w(0);
  writeReport(w, report, false);
  return w.take();
}

}  // namespace qconv
