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
  /// `limit`, when not 0, is a lower bound than the queue's for this push. `reaped`, when
  /// given, runs once the job has run, on the thread that pushes or waits next (the writer's
  /// thread never frees: see reap), e.g. to recycle the job's buffer.
  void push(uint64_t bytes, std::function<void()> job, uint64_t limit = 0, std::function<void()> reaped = nullptr);
  /// Wait until every job has run; rethrow what one threw.
  void wait();
  /// Run the `reaped` of the jobs that have run, here, now (push and wait do it too).
  void collect();

 private:
  struct Job {
    uint64_t bytes;
    std::function<void()> run;
    std::function<void()> reaped;
  };
  void run();
  void rethrow();  // with mutex_ held
  /// With mutex_ held: destroy the jobs that ran. Their memory is freed on the pushing thread,
  /// never on the writer's: glibc gives a thread that first frees (or allocates) an arena of its
  /// own, 64 MiB of address space, which an address-space limit (ulimit -v) counts.
  void reap();

  const uint64_t limit_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;   // the first done_ ran already (reap), then the ones to run, in order
  size_t done_ = 0;
  uint64_t inFlight_ = 0;  // bytes of the jobs queued or running
  uint64_t pending_ = 0;   // the jobs queued or running
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace qconv::io
