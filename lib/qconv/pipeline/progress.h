// A progress line for long work on a terminal (issue 29): after about a second, one line on
// stderr, rewritten in place every 200 ms and cleared at the end:
//
//   qconv: in.onnx: writing out.onnx: 512 MiB of about 1.6 GiB (2.1 s)
//   qconv: batch: 5 of 22 models done (12.4 s)
//
// Only when the caller asks (ConvertOptions::progress: the CLI asks when stderr is a terminal),
// so never in a pipe or a log file. Every ordinary line goes through the sink (StderrLines), which
// clears the progress line before it, so the two never mix.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace qconv {

class DiagnosticSink;

class Progress {
 public:
  /// `text` gives the line to show from the seconds since the start (called on the progress
  /// thread); nothing is shown before `delay`, nor at all when `enabled` is false. A delay of 0
  /// shows the first line here, before the work starts.
  Progress(DiagnosticSink& err, bool enabled, std::chrono::milliseconds delay, std::function<std::string(double)> text);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// "1.6 GiB", "512 MiB", "12 KiB", "100 bytes".
  static std::string bytes(uint64_t n);

 private:
  void loop();

  DiagnosticSink& err_;
  std::function<std::string(double)> text_;
  std::chrono::milliseconds delay_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace qconv
