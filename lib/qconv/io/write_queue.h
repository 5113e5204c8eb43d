// Writes on a thread of their own, in order: a pass makes the next tensor while the last one
// goes to its file (io::ExternalFiles::keep), with a bound on the bytes in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace qconv::io {

class WriteQueue {
 public:
  /// At most `limit` bytes in flight (one job of any size when none is).
  explicit WriteQueue(uint64_t limit) : limit_(limit) {}
  /// Waits for the jobs; an error of theirs is dropped (wait() is where errors are seen).
  ~WriteQueue();
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  /// Run `job` (which holds `bytes` bytes) after the jobs before it. Waits while the bytes in
  /// flight would pass the limit; rethrows what an earlier job threw (the jobs after it are not run).
  void push(uint64_t bytes, std::function<void()> job);
  /// Wait until every job has run; rethrow what one threw.
  void wait();

 private:
  void run();
  void rethrow();  // with mutex_ held

  const uint64_t limit_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<uint64_t, std::function<void()>>> jobs_;
  uint64_t inFlight_ = 0;  // bytes of the jobs queued or running
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace qconv::io
