#include "qconv/io/write_queue.h"

#include <algorithm>
#include <chrono>

namespace qconv::io {

WriteQueue::~WriteQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WriteQueue::rethrow() {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

namespace {

/// cv.wait(lock, ready), through wait_for: GCC 12's libstdc++ gives condition_variable::wait a new
/// symbol version (GLIBCXX_3.4.30), which alone would put the wheel's floor at glibc 2.35 instead
/// of 2.34 (docs/python.md: RHEL 9 and Amazon Linux 2023 have 2.34); wait_for is inline down to
/// pthread_cond_clockwait. The hour is only a bound on one wait: `ready` decides.
template <typename Ready>
void waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Ready ready) {
  while (!ready()) cv.wait_for(lock, std::chrono::hours(1));
}

}  // namespace

void WriteQueue::reap() {
  for (; done_ > 0; --done_) {
    if (jobs_.front().reaped) jobs_.front().reaped();
    jobs_.pop_front();
  }
}

void WriteQueue::push(uint64_t bytes, std::function<void()> job, uint64_t limit, std::function<void()> reaped) {
  const uint64_t bound = limit ? std::min(limit, limit_) : limit_;
  std::unique_lock<std::mutex> lock(mutex_);
  waitUntil(changed_, lock, [&] { return inFlight_ == 0 || inFlight_ + bytes <= bound || error_; });
  reap();
  rethrow();
  inFlight_ += bytes;
  ++pending_;
  jobs_.push_back(Job{bytes, std::move(job), std::move(reaped)});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  lock.unlock();
  changed_.notify_all();
}

void WriteQueue::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  waitUntil(changed_, lock, [&] { return pending_ == 0; });  // jobs, not bytes: a job may hold none
  reap();
  rethrow();
}

void WriteQueue::collect() {
  std::lock_guard<std::mutex> lock(mutex_);
  reap();
}

void WriteQueue::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    waitUntil(changed_, lock, [&] { return stopping_ || jobs_.size() > done_; });
    if (jobs_.size() == done_) return;  // stopping, and nothing left
    Job& job = jobs_[done_];  // stays put: the pusher pops only jobs that ran, from the front
    const bool skip = error_ != nullptr;  // an earlier job failed: the file is bad already
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      try {
        job.run();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    lock.lock();
    if (failed && !error_) error_ = failed;
    ++done_;  // destroyed by the next push or wait, on the pushing thread (reap)
    inFlight_ -= job.bytes;
    --pending_;
    changed_.notify_all();
  }
}

}  // namespace qconv::io
