#include "qconv/pipeline/progress.h"

#include <fmt/format.h>

#include "qconv/diagnostics.h"

namespace qconv {

Progress::Progress(DiagnosticSink& err, bool enabled, std::chrono::milliseconds delay,
                   std::function<std::string(double)> text)
    : err_(err), text_(std::move(text)), delay_(delay), start_(std::chrono::steady_clock::now()) {
  if (!enabled) return;
  if (delay_.count() <= 0) err_.progress(text_(0.0));  // from the start: shown before any work, whatever runs first
  thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
  err_.progress("");  // cleared
}

std::string Progress::bytes(uint64_t n) {
  const double d = static_cast<double>(n);
  if (n >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", d / (1u << 30));
  if (n >= (uint64_t{1} << 20)) return fmt::format("{:.0f} MiB", d / (1u << 20));
  if (n >= (uint64_t{1} << 10)) return fmt::format("{:.0f} KiB", d / (1u << 10));
  return fmt::format("{} bytes", n);
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (stop_.wait_for(lock, delay_, [this] { return stopping_; })) return;
  do {
    err_.progress(text_(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()));
  } while (!stop_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; }));
}

}  // namespace qconv
