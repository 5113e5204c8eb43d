#include "qconv/io/huge_page_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <string>

namespace qconv::io {

#if defined(__GLIBC__) && !defined(QCONV_SANITIZED)
namespace {

/// The start of a small file (sysfs), or empty.
std::string readSmall(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buffer[128];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  close(fd);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

/// The kernel's transparent huge page size, or 0 when it makes none (or one this is not for).
size_t hugePageSize() {
  const std::string enabled = readSmall("/sys/kernel/mm/transparent_hugepage/enabled");
  if (enabled.empty() || enabled.find("[never]") != std::string::npos) return 0;
  const unsigned long long size =
      std::strtoull(readSmall("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").c_str(), nullptr, 10);
  const bool power_of_two = size != 0 && (size & (size - 1)) == 0;
  return power_of_two && size <= (32u << 20) ? static_cast<size_t>(size) : 0;
}

/// Whether the process's address space or data segment is limited (ulimit -v, -d): there the
/// heap's padding would count against the limit, and a run near it would fail sooner.
bool limited() {
  rlimit as{}, data{};
  return (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
         (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
}

}  // namespace
#endif

size_t useHugePageHeap() {
#if defined(__GLIBC__) && !defined(QCONV_SANITIZED)
  if (limited()) return 0;
  const uintptr_t huge = hugePageSize();
  if (!huge) return 0;
  mallopt(M_TOP_PAD, static_cast<int>(kHeapPad));                // 1
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold));  // 2
  // 3. A block past the top grows the heap (by it and kHeapPad); malloc wrote the block's header
  // before it and the top's after it. Freed, it goes back into the top, whose header is then at
  // the block's again.
  constexpr uintptr_t kGrow = uintptr_t{1} << 20;
  void* grow = std::malloc(kGrow);
  if (!grow) return 0;
  const uintptr_t at = reinterpret_cast<uintptr_t>(grow);
  const uintptr_t start = (at + kGrow + 64 + huge - 1) & ~(huge - 1);
  const uintptr_t heap_end = reinterpret_cast<uintptr_t>(sbrk(0));
  std::free(grow);
  if (at >= heap_end || start >= heap_end) return 0;  // not from the brk heap (it could not grow)
  // 4. The filler: a chunk from the top's start (16 bytes of header before `at`) of start - at
  // bytes, so that the top's header goes at start - 16, below the advice. Kept: never freed.
  void* volatile filler = std::malloc(start - at - 8);
  if (!filler) return 0;
  const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(huge - 1);
  if (end <= start || madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE) != 0) return 0;
  return end - start;
#else
  return 0;
#endif
}

}  // namespace qconv::io
