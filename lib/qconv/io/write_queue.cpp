#include "qconv/io/write_queue.h"

#include <algorithm>

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

void WriteQueue::reap() {
  for (; done_ > 0; --done_) {
    if (jobs_.front().reaped) jobs_.front().reaped();
    jobs_.pop_front();
  }
}

void WriteQueue::push(uint64_t bytes, std::function<void()> job, uint64_t limit, std::function<void()> reaped) {
  const uint64_t bound = limit ? std::min(limit, limit_) : limit_;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return inFlight_ == 0 || inFlight_ + bytes <= bound || error_; });
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
  changed_.wait(lock, [&] { return pending_ == 0; });  // jobs, not bytes: a job may hold none
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
    changed_.wait(lock, [&] { return stopping_ || jobs_.size() > done_; });
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
