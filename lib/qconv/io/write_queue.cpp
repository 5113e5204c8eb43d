#include "qconv/io/write_queue.h"

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

void WriteQueue::push(uint64_t bytes, std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return inFlight_ == 0 || inFlight_ + bytes <= limit_ || error_; });
  rethrow();
  inFlight_ += bytes;
  jobs_.emplace_back(bytes, std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  lock.unlock();
  changed_.notify_all();
}

void WriteQueue::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return inFlight_ == 0; });
  rethrow();
}

void WriteQueue::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    auto [bytes, job] = std::move(jobs_.front());
    jobs_.pop_front();
    const bool skip = error_ != nullptr;  // an earlier job failed: the file is bad already
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      try {
        job();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    job = nullptr;  // its bytes leave memory before the next push is let in
    lock.lock();
    if (failed && !error_) error_ = failed;
    inFlight_ -= bytes;
    changed_.notify_all();
  }
}

}  // namespace qconv::io
