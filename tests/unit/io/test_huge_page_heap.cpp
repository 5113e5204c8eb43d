// io::useHugePageHeap: what the command allocates after it lands in heap advised for huge pages,
// where the kernel makes them; nothing changes where it makes none.
#include <catch2/catch.hpp>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "qconv/io/huge_page_heap.h"

namespace {

#if !defined(QCONV_SANITIZED) && defined(__GLIBC__)
std::string fileText(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The "THPeligible" value of the mapping holding `address` in /proc/self/smaps, or -1.
int hugePageEligible(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2) {  // a mapping's first line (no field name parses so)
      inside = from <= address && address < to;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::atoi(line.c_str() + 12);
  }
  return -1;
}
#endif

}  // namespace

TEST_CASE("the command's heap: what it allocates next is advised for huge pages where the kernel makes them") {
  const size_t advised = qconv::io::useHugePageHeap();
#if defined(QCONV_SANITIZED) || !defined(__GLIBC__)
  CHECK(advised == 0);  // a sanitizer's allocator is its own
#else
  const std::string enabled = fileText("/sys/kernel/mm/transparent_hugepage/enabled");
  rlimit as{}, data{};
  const bool limited = (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                       (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  if (enabled.empty() || enabled.find("[never]") != std::string::npos || limited) {
    CHECK(advised == 0);
    return;
  }
  REQUIRE(advised >= (size_t{8} << 20));  // most of kHeapPad, from a huge page boundary
  // a block the size of a conversion's protos, from the heap's top: inside the advice
  void* block = std::malloc(size_t{256} << 10);
  REQUIRE(block);
  CHECK(hugePageEligible(reinterpret_cast<uintptr_t>(block)) == 1);
  std::free(block);
#endif
}

TEST_CASE("the command's heap: nothing is done under an address-space limit, which its padding would count against") {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_AS, &before) == 0);
  rlimit limited = before;
  limited.rlim_cur = before.rlim_max == RLIM_INFINITY ? rlim_t{1} << 40 : before.rlim_max;  // 1 TiB: a limit, never reached
  REQUIRE(setrlimit(RLIMIT_AS, &limited) == 0);
  const size_t advised = qconv::io::useHugePageHeap();
  REQUIRE(setrlimit(RLIMIT_AS, &before) == 0);
  CHECK(advised == 0);
}
