#include "platform/thread_pool.h"

#include "platform/error.h"

namespace g4 {

namespace {
void range_of(int64_t n, int parts, int index, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, extra = n % parts;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw Error("thread pool: needs at least 1 thread, got " + std::to_string(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
    }
    int64_t b, e;
    range_of(n, size(), index, &b, &e);
    if (b < e) (*job)(b, e, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    pending_ = int(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t b, e;
  range_of(n, size(), 0, &b, &e);
  if (b < e) fn(b, e, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace g4
