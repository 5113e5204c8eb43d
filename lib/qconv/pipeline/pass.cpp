#include "qconv/pipeline/pass.h"

#include <fmt/format.h>

namespace qconv {

void PassContext::refuse(const ir::Node& n, const std::string& reason) {
  std::string line = fmt::format("{}: not fused: {}", n.label(), reason);
  log_.info("{}", line);
  refusals_.push_back(std::move(line));
}

void PassContext::approximate(const ir::Node& n, const std::string& what) {
  std::string line = fmt::format("{}: {}", n.label(), what);
  log_.warn("approximation: {}", line);
  approximations_.push_back(std::move(line));
}

void PassContext::keepLabel(const std::string& label, const std::string& reason) {
  log_.info("{}: {}", label, reason);
}

void PassContext::unconverted(const ir::Node& n, const std::string& reason) {
  log_.info("{}: {}", n.label(), reason);
  unconverted_[n.label()] = reason;
}

std::string PassContext::unconvertedReason(const std::string& label) const {
  auto it = unconverted_.find(label);
  return it == unconverted_.end() ? std::string() : it->second;
}

void PassContext::warn(const std::string& label, const std::string& what) {
  std::string line = fmt::format("{}: {}", label, what);
  log_.warn("{}", line);
  warnings_.push_back(std::move(line));
}

void PassContext::note(const ir::Node& n, const std::string& what) { log_.debug("{}: {}", n.label(), what); }

const std::vector<PassInfo>& passRegistry() {
  static const std::vector<PassInfo> registry = {
#define QCONV_PASS(NAME, FN, FORMATS, SUMMARY) {NAME, &FN, PassFormats::FORMATS, SUMMARY},
#include "qconv/passes/passes.def"
#undef QCONV_PASS
  };
  return registry;
}

const PassInfo* findPass(std::string_view name) {
  for (const auto& p : passRegistry())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace qconv
