// io::WriteQueue: jobs run in order on their own thread, at most `limit` bytes in flight, and
// the first error comes back to the caller (the jobs after it do not run).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include "qconv/io/write_queue.h"

TEST_CASE("WriteQueue runs jobs in order and keeps the bytes in flight under its limit") {
  qconv::io::WriteQueue queue(100);
  std::vector<int> order;  // written by the queue's thread only, read after wait()
  std::atomic<int> running{0}, most{0};
  for (int i = 0; i < 20; ++i)
    queue.push(40, [&, i] {
      const int now = ++running;
      if (now > most) most = now;
      order.push_back(i);
      --running;
    });
  queue.wait();
  REQUIRE(order.size() == 20);
  for (int i = 0; i < 20; ++i) REQUIRE(order[static_cast<size_t>(i)] == i);
  REQUIRE(most == 1);
}

TEST_CASE("WriteQueue gives back the first error at the next push or wait, and runs nothing after it") {
  qconv::io::WriteQueue queue(1 << 20);
  std::atomic<int> ran{0};
  queue.push(1, [&] { ++ran; });
  queue.push(1, [&] { throw std::runtime_error("disk full"); });
  std::string said;
  try {
    queue.push(1, [&] { ++ran; });  // throws here if the failed job has run already
    queue.wait();
  } catch (const std::runtime_error& e) {
    said = e.what();
  }
  REQUIRE(said == "disk full");
  REQUIRE(ran == 1);
  queue.wait();  // said once
}

TEST_CASE("wait waits for jobs that hold no bytes too") {
  // keepPieces pushes a job of 0 bytes (the alignment's hash) before the pieces: wait() once
  // returned while it was still queued, and a reader then met a file being written (issue 36)
  qconv::io::WriteQueue q(1 << 20);
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i)
    q.push(0, [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ++ran;
    });
  q.wait();
  REQUIRE(ran == 50);
}
