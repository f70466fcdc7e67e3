// A persistent pool of worker threads for data-parallel loops (one per core by default).
// parallel_for splits [0, n) into one contiguous range per thread; the caller's thread takes
// the first range, so a pool of 1 runs inline with no synchronisation.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace g4 {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (including the caller)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end, thread_index); ranges are disjoint and cover [0, n). Blocks until all finish.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace g4
