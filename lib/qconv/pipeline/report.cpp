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
    w.key("pass");
    w.value(s.pass);
    w.key("node");
    w.value(s.subject);
    w.key("kind");
    w.value(reportKindName(s.kind));
    w.key("reason");
    w.value(s.text);
    w.endObject();
  }
  w.endArray();
}

void nodes(JsonWriter& w, const NodeTrace& trace) {
  w.key("nodes");
  w.beginArray();
  for (const NodeRow& n : trace.input) {
    w.beginObject();
    w.key("name");
    w.value(n.name);
    w.key("op");
    w.value(n.op);
    w.key("outcome");
    w.value(outcomeName(n.outcome));
    w.key("passes");
    w.value(n.passes);
    w.key("reason");
    w.value(n.reason);
    w.key("became");
    w.strings(n.became);
    w.endObject();
  }
  w.endArray();
}

void outputNodes(JsonWriter& w, const NodeTrace& trace) {
  w.key("output_nodes");
  w.beginArray();
  for (const OutputNode& n : trace.output) {
    w.beginObject();
    w.key("id");
    w.value(n.id);
    w.key("op");
    w.value(n.op);
    w.key("outcome");
    w.value(outcomeName(n.outcome));
    w.key("reason");
    w.value(n.reason);
    w.key("from");
    w.strings(n.from);
    w.endObject();
  }
  w.endArray();
}

/// One item; `times`: its stage times too (the page leaves them out: they differ run to run).
void writeItem(JsonWriter& w, const ItemReport& r, bool times) {
  w.beginObject();
  w.key("input");
  w.value(r.input);
  w.key("output");
  w.value(r.output);
  w.key("data_file");
  w.stringOrNull(r.data_file);
  w.key("exit_code");
  w.value(r.exit_code);
  w.key("error");
  w.stringOrNull(r.error);
  w.key("error_node");
  w.stringOrNull(r.error_node);
  w.key("summary");
  w.stringOrNull(r.summary);
  w.key("dialects");
  w.strings(r.dialects);
  w.key("quantized_tensors");
  w.value(r.quantized_tensors);
  w.key("rewritten");
  w.beginArray();
  for (const Rewritten& g : r.rewritten) {
    w.beginObject();
    w.key("pass");
    w.value(g.pass);
    w.key("node");
    w.value(g.node);
    w.key("op");
    w.value(g.op);
    w.key("kept");
    w.value(g.kept);
    w.key("became");
    w.strings(g.became);
    w.key("absorbed");
    w.strings(g.absorbed);
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
    w.key("pass");
    w.value(s.pass);
    w.key("node");
    w.value(s.subject);
    w.key("what");
    w.value(s.text);
    w.endObject();
  }
  w.endArray();
  w.key("warnings");
  said(w, r.said, {Report::Warning, Report::Advisory});
  w.key("notes");
  said(w, r.said, {Report::Done});
  nodes(w, r.trace);
  w.key("graph");
  w.stringOrNull(r.graph_id);
  outputNodes(w, r.trace);
  w.key("counts");
  w.beginObject();
  for (const auto& [what, n] : r.counts) {
    w.key(what);
    w.value(n);
  }
  w.endObject();
  if (times) {
    w.key("stages");
    w.beginArray();
    for (const StageTiming& t : r.stages) {
      w.beginObject();
      w.key("name");
      w.value(t.name);
      w.key("ms");
      w.value(t.milliseconds);
      w.endObject();
    }
    w.endArray();
  }
  w.endObject();
}

void writeReport(JsonWriter& w, const RunReport& report, bool times) {
  w.beginObject();
  w.key("qconv_report");
  w.value(1);  // the schema's version: a key changes meaning only with it
  w.key("command");
  w.value("convert");
  w.key("format");
  w.value(report.format);
  w.key("target");
  w.stringOrNull(report.target);
  w.key("exit_code");
  w.value(report.exit_code);
  if (times) {
    w.key("ms");
    w.value(report.milliseconds);
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
