#include "qconv/pipeline/pass_manager.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>

#include "qconv/diag.h"
#include "qconv/ir/dump.h"
#include "qconv/pipeline/declare_types.h"
#include "qconv/pipeline/output_errors.h"

namespace qconv {

PassManager::PassManager(const std::vector<std::string>& names) {
  std::vector<const PassInfo*> named;
  for (const auto& name : names) {
    const PassInfo* p = findPass(name);
    if (!p) {
      std::string known;
      for (const auto& q : passRegistry()) known += (known.empty() ? "" : ", ") + std::string(q.name);
      throw Error(ExitCode::Usage, fmt::format("unknown pass '{}' (passes: {})", name, known));
    }
    named.push_back(p);
  }
  // The Always stages the list does not name: those before the registry's first other pass
  // go first, the rest last.
  auto listed = [&](const PassInfo& p) { return std::find(named.begin(), named.end(), &p) != named.end(); };
  bool leading = true;
  std::vector<const PassInfo*> trailing;
  for (const auto& p : passRegistry()) {
    if (p.formats != PassFormats::Always) {
      leading = false;
      continue;
    }
    if (listed(p)) continue;
    (leading ? passes_ : trailing).push_back(&p);
  }
  passes_.insert(passes_.end(), named.begin(), named.end());
  passes_.insert(passes_.end(), trailing.begin(), trailing.end());
}

double PassManager::now() const {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void PassManager::run(ir::Model& model, PassContext& ctx, std::ostream* dump, const std::atomic<bool>* cancel) {
  if (dump) {
    fmt::print(*dump, "; IR after parse\n");
    ir::dump(model.graph, *dump);
  }
  // the input's errors, to say which of the output's it kept (output_errors.h)
  ValidScales valid_scales;  // for the first pass only (validate reads none of them again)
  const std::vector<analysis::Finding> input_errors =
      timeStage("verify input", [&] { return verifyErrors(model, &valid_scales); });
  struct Offer {  // withdrawn after the first pass, and when a pass throws
    PassContext& ctx;
    ~Offer() { ctx.offerValidScales(nullptr); }
  } offer{ctx};
  ctx.offerValidScales(&valid_scales);
  bool shapes_declared = false;
  const TargetProfile& t = ctx.target();
  for (const PassInfo* p : passes_) {
    throwIfCancelled(cancel, ctx.path());
    if (p->phase == PassPhase::Target && !shapes_declared && schemas_ && t.readsInferredShapes()) {
      shapes_declared = true;
      ctx.setPass("infer-shapes");
      const size_t declared = timeStage("infer shapes", [&] { return declareInferredShapes(model, *schemas_); });
      ctx.report(Report::Detail, ctx.path(), fmt::format("{} shapes declared as ONNX's inference gives them", declared));
      if (dump) {
        fmt::print(*dump, "; IR after infer shapes\n");
        ir::dump(model.graph, *dump);
      }
      // again for a pass whose folds make more shapes inferable (fold-shapes), in its stage's time
      ctx.offerShapeInference([&model, this] { return declareInferredShapes(model, *schemas_); });
    }
    ctx.setPass(p->name);
    timeStage(std::string(p->name), [&] { p->run(model, ctx); });
    removals_.emplace_back(p->name, model.graph.nodesDestroyed());
    ctx.offerValidScales(nullptr);
    if (dump) {
      fmt::print(*dump, "; IR after {}\n", p->name);
      ir::dump(model.graph, *dump);
    }
  }
  ctx.offerShapeInference({});
  ctx.setPass("verify-output");
  timeStage("verify output", [&] { sayOutputErrors(input_errors, model, ctx); });
  ctx.setPass("");
}

}  // namespace qconv
