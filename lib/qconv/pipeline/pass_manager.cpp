#include "qconv/pipeline/pass_manager.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>

#include "qconv/diag.h"
#include "qconv/ir/dump.h"

namespace qconv {

PassManager::PassManager(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const PassInfo* p = findPass(name);
    if (!p) {
      std::string known;
      for (const auto& q : passRegistry()) known += (known.empty() ? "" : ", ") + std::string(q.name);
      throw Error(ExitCode::Usage, fmt::format("unknown pass '{}' (passes: {})", name, known));
    }
    passes_.push_back(p);
  }
  auto at = [&](std::string_view name) {
    auto it = std::find_if(passes_.begin(), passes_.end(), [&](const PassInfo* p) { return p->name == name; });
    return it == passes_.end() ? -1 : static_cast<int>(it - passes_.begin());
  };
  const int fuse = at("fuse-qlinear-conv");
  if (fuse >= 0 && at("fix-bias-scale") < fuse)
    throw Error(ExitCode::Usage, "pass list: fuse-qlinear-conv must be followed by fix-bias-scale "
                                 "(a fused QLinearConv has a float bias until then)");
}

double PassManager::now() const {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void PassManager::run(ir::Model& model, PassContext& ctx, std::ostream* dump) {
  if (dump) {
    fmt::print(*dump, "; IR after parse\n");
    ir::dump(model.graph, *dump);
  }
  for (const PassInfo* p : passes_) {
    timeStage(std::string(p->name), [&] { p->run(model, ctx); });
    if (dump) {
      fmt::print(*dump, "; IR after {}\n", p->name);
      ir::dump(model.graph, *dump);
    }
  }
}

}  // namespace qconv
