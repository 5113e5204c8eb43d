// What the ONNX checker's operator schemas cost a lone conversion, both ways, in one process:
//   registry: libonnx's OpSchemaRegistry, which builds all of its schemas on the first lookup
//             (what qconv's checker used before io::OpSchemas);
//   lazy:     io::OpSchemas, building only those looked up (here: a QDQ Conv model's three).
// Prints "registry <ms>" and "lazy <ms>". bench/bench_batch.py runs it.
#include <chrono>
#include <cstdio>

#include "qconv/io/op_schemas.h"

namespace {
double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main() {
  auto t = std::chrono::steady_clock::now();
  const qconv::io::OpSchemas lazy;
  for (const char* op : {"QuantizeLinear", "DequantizeLinear", "Conv"}) (void)lazy.GetSchema(op, 13, "");
  const double lazy_ms = msSince(t);
  t = std::chrono::steady_clock::now();
  (void)onnx::OpSchemaRegistry::Schema("Conv", 13, "");
  std::printf("registry %.2f\nlazy %.2f\n", msSince(t), lazy_ms);
  return 0;
}
