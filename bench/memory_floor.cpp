// The memory floor of per-node work at a graph's size (bench_linear.py): what any tool pays per
// element, at 10k and at 1M elements, for the two kinds of access a converter cannot avoid.
//   names: an unordered_set<std::string> of N names, each inserted then found (a name table:
//          import's, the ONNX checker's);
//   nodes: N heap objects of a node's size, allocated in order between smaller allocations (as
//          parse leaves them), each visited once through a pointer (one pass over the graph).
// Prints "<kind> <N> <microseconds per element>" per line; the best of 5 runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double names(size_t n) {
  std::vector<std::string> all;
  all.reserve(n);
  for (size_t i = 0; i < n; ++i) all.push_back("value_" + std::to_string(i));
  const auto t0 = Clock::now();
  std::unordered_set<std::string> table;
  for (const auto& s : all) table.insert(s);
  size_t found = 0;
  for (const auto& s : all) found += table.count(s);
  const auto t1 = Clock::now();
  if (found != n) std::abort();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(n);
}

struct FakeNode {
  char payload[384];
  unsigned kind;
};

double nodes(size_t n) {
  std::vector<std::unique_ptr<FakeNode>> all;
  std::vector<std::unique_ptr<std::string>> between;  // a value's name, as parse interleaves them
  all.reserve(n);
  between.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    all.push_back(std::make_unique<FakeNode>());
    all.back()->kind = static_cast<unsigned>(i % 7);
    between.push_back(std::make_unique<std::string>(40, 'x'));
  }
  const auto t0 = Clock::now();
  unsigned sum = 0;
  for (const auto& p : all) sum += p->kind;
  const auto t1 = Clock::now();
  if (sum == 0xffffffffu) std::abort();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const size_t n = std::strtoull(argv[i], nullptr, 10);
    double bestNames = 1e9, bestNodes = 1e9;
    for (int run = 0; run < 5; ++run) {
      bestNames = std::min(bestNames, names(n));
      bestNodes = std::min(bestNodes, nodes(n));
    }
    std::printf("names %zu %.4f\nnodes %zu %.4f\n", n, bestNames, n, bestNodes);
  }
  return 0;
}
