// The command's heap on transparent huge pages.
//
// A conversion touches its heap once, page by page: a ResNet-50-shape model's protos, IR and
// decoded constants are about 4 MiB, and with 4 KiB pages that is some 800 page faults, each
// allocating, zeroing and charging one page: 1.5 ms of the run's 12 ms of CPU (`perf`; the run
// with huge pages made 607 faults instead of 1,345). A 2 MiB huge page is one fault, its zeroing
// one pass. glibc asks for them with its tunable glibc.malloc.hugetlb=1, which only the
// environment sets, before the process starts; this does the same from main:
//
//   1. M_TOP_PAD: the heap grows by at least kHeapPad at once, so one advice covers what a run
//      allocates (a larger heap grows on as before, on 4 KiB pages);
//   2. M_MMAP_THRESHOLD: blocks below kMmapThreshold come from the heap (glibc's own threshold
//      rises to a run's buffer sizes after the first of them is freed anyway);
//   3. a block past the heap's top grows it; MADV_HUGEPAGE from the first huge page boundary past
//      every byte malloc has written (a huge page is never made where one of its 4 KiB pages is
//      mapped already) to the end of the heap;
//   4. a block up to that boundary, never freed and never touched (no memory, address space
//      only), so that what the run allocates next lands on the huge pages.
//
// For a process that runs one command and exits (tools/qconv_main.cpp), not for a library: the
// Python module never calls it (its host's allocator is not qconv's to change). Nothing happens
// where the kernel has no transparent huge pages (enabled = never), where its huge page is not
// 2 MiB-ish (above 32 MiB: arm64 with 64 KiB pages), under an address-space or data limit
// (ulimit -v, -d: the padding would count against it; a ResNet-50 shape's conversion needs 37.4
// MiB of address space without it, 49.7 with it), under a sanitizer (its own allocator), or
// without glibc. docs/benchmarks.md has the measurements.
#pragma once

#include <cstddef>

namespace qconv::io {

constexpr size_t kHeapPad = size_t{16} << 20;
constexpr size_t kMmapThreshold = size_t{4} << 20;

/// Steps 1 to 4 above; returns the bytes advised (0: nothing done). Call it first thing in main,
/// before any thread starts.
size_t useHugePageHeap();

}  // namespace qconv::io
