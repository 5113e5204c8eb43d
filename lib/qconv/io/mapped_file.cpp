#include "qconv/io/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

namespace qconv::io {

namespace {

/// One live mapping, as the handler reads it: [begin, end) and whether a page of it faulted.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<bool> faulted{false};
};

/// The handler's state (mapped_file.h says why it is process-wide): the table, read lock-free;
/// the handler that was there before ours and how many mappings need ours, under `mutex`.
struct Guard {
  Slot slots[MappedFile::kMaxMappings];
  std::mutex mutex;
  size_t users = 0;
  struct sigaction previous {};
  uintptr_t page = 4096;
};

Guard& guard() {
  static Guard g;  // constructed before the first mapping, never destroyed while one lives
  return g;
}

/// The action that was there before ours: as if ours were not installed.
void chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = guard().previous;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_DFL || (prev.sa_handler == SIG_IGN && info->si_code > 0)) {
    // the default action: die of the signal (a fault is never ignored: the kernel would not either)
    signal(sig, SIG_DFL);
    raise(sig);  // pending until this returns; a fault also repeats
    return;
  }
  if (prev.sa_handler != SIG_IGN) prev.sa_handler(sig);
}

void onSigbus(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  Guard& g = guard();
  for (Slot& s : g.slots) {
    if (!(s.begin.load(std::memory_order_acquire) <= at && at < s.end.load(std::memory_order_acquire))) continue;
    // the file's page is gone: zeros in its place, read on; the owner sees faulted()
    void* page = reinterpret_cast<void*>(at & ~(g.page - 1));
    if (mmap(page, g.page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      s.faulted.store(true, std::memory_order_release);
      errno = saved;
      return;
    }
  }
  errno = saved;
  chain(sig, info, context);
}

bool isOurs(const struct sigaction& a) { return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == onSigbus; }

/// A slot for [begin, end), the handler installed for it; kMaxMappings when the table is full.
size_t enter(const char* data, size_t size) {
  Guard& g = guard();
  std::lock_guard<std::mutex> lock(g.mutex);
  size_t slot = 0;
  for (bool expected = false; slot < MappedFile::kMaxMappings; ++slot, expected = false)
    if (g.slots[slot].used.compare_exchange_strong(expected, true)) break;
  if (slot == MappedFile::kMaxMappings) return slot;
  if (g.users++ == 0) {
    g.page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction ours {};
    ours.sa_sigaction = onSigbus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGBUS, &ours, &g.previous);
  }
  Slot& s = g.slots[slot];
  s.faulted.store(false);
  s.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
  s.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
  return slot;
}

/// The slot's range no longer the handler's (before the pages are unmapped: a mapping made at the
/// same addresses afterwards is another's).
void forget(size_t slot) {
  Slot& s = guard().slots[slot];
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
}

/// The slot freed; the handler that was there before put back with the last one.
void leave(size_t slot) {
  Guard& g = guard();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.slots[slot].used.store(false);
  if (--g.users == 0) {
    struct sigaction now {};
    // put back only our own: a handler installed after ours (which may chain to it) stays
    if (sigaction(SIGBUS, nullptr, &now) == 0 && isOurs(now)) sigaction(SIGBUS, &g.previous, nullptr);
  }
}

}  // namespace

MappedFile::MappedFile(int fd, size_t size, bool sequential) : size_(size) {
  if (size == 0) return;
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return;
  slot_ = enter(static_cast<const char*>(p), size);
  if (slot_ == kMaxMappings) {  // unguarded: not made
    munmap(p, size);
    errno = EMFILE;
    return;
  }
  data_ = static_cast<const char*>(p);
  if (sequential) madvise(p, size, MADV_SEQUENTIAL);
}

MappedFile::~MappedFile() {
  if (!data_) return;
  forget(slot_);
  munmap(const_cast<char*>(data_), size_);
  leave(slot_);
}

bool MappedFile::faulted() const {
  return data_ && guard().slots[slot_].faulted.load(std::memory_order_acquire);
}

bool guardInstalled() {
  struct sigaction now {};
  return sigaction(SIGBUS, nullptr, &now) == 0 && isOurs(now);
}

void readInCold(int fd, uint64_t size) {
  constexpr uint64_t kSamples = 16, kLeast = uint64_t{4} << 20;
  if (size < kLeast) return;
  bool cold = false;
  for (uint64_t i = 0; i < kSamples && !cold; ++i) {
    char byte;
    iovec one{&byte, 1};
    // RWF_NOWAIT: EAGAIN where the byte is not in the cache (a file system that cannot say: no fill)
    cold = preadv2(fd, &one, 1, static_cast<off_t>((size - 1) * i / (kSamples - 1)), RWF_NOWAIT) < 0 && errno == EAGAIN;
  }
  if (!cold) return;
  const int sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (sink < 0) return;  // no /dev/null: the mapping's faults and the reads fill the cache as they go
  off_t at = 0;
  while (static_cast<uint64_t>(at) < size) {
    const ssize_t sent = sendfile(sink, fd, &at, static_cast<size_t>(size - static_cast<uint64_t>(at)));
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) break;  // a file shortened meanwhile, or one sendfile cannot read: the reads say what is wrong
  }
  close(sink);
}

}  // namespace qconv::io
