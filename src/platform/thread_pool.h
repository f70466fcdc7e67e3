// A persistent pool of worker threads for data-parallel loops (one per core by default).
// parallel_for splits [0, n) into one contiguous range per thread; the caller's thread takes
// the first range, so a pool of 1 runs inline with no synchronisation.
//
// Hand-off: decode issues a few hundred small parallel loops per token, separated by tens of
// microseconds of serial work. Waking a thread through a condition variable costs about as much
// (more in a VM), so workers and the caller first spin on an atomic for a short, bounded time
// (kSpinMicros) and only then sleep on the condition variable.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace g4 {

class ThreadPool {
 public:
  static constexpr int kSpinMicros = 200;

  explicit ThreadPool(int threads);  // threads >= 1 (including the caller)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end, thread_index); ranges are disjoint and cover [0, n). Blocks until all finish.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);
  // [0, units) in pieces of at most `chunk` units, each unit exactly once: fn(begin, end, thread).
  // Thread t owns the contiguous share [share_begin(t), share_begin(t + 1)) and walks it front to
  // back; a thread done with its own share takes pieces from the back of the others', so no
  // thread idles at the join while work is left. Pieces shrink as a share runs out (its owner
  // takes a quarter of what is left, a thief half, both capped at `chunk` and at least one
  // granule), so the threads finish about a granule apart, not up to a chunk. Shares start at
  // multiples of `chunk`, every piece at a multiple of `granule` (the caller's tile: `chunk` must
  // be a multiple of it), and every piece ends at one too or at `units`. Blocks until all finish;
  // not reentrant.
  // Why shares, not chunks dealt out in turn: a thread's chunks stay consecutive in memory, so a
  // memory-bound kernel's streams (and its prefetch) run on from one chunk into the next.
  void parallel_chunks(int64_t units, int64_t chunk, const std::function<void(int64_t, int64_t, int)>& fn,
                       int64_t granule = 1);
  // Where thread t's share starts: units·t/threads rounded to the nearest multiple of chunk.
  static int64_t share_begin(int64_t units, int64_t chunk, int threads, int t);

  // Bytes for a worker to read into its caches while the caller goes on.
  struct WarmRange {
    const std::byte* data = nullptr;
    size_t bytes = 0;
  };
  // Hands worker t (1..size()-1) the range per_worker[t - 1] to read, and returns at once: the
  // workers read the weights the next parallel call will give them while the caller does its
  // serial work, instead of idling until that call. A worker drops the rest of its range as
  // soon as the next call (parallel_for, parallel_chunks, warm or stop_warm) is posted to the
  // workers, and the bytes are only read, so this changes no result. The ranges must stay
  // readable until then (a call small enough to run inline on the caller does not end it).
  // per_worker.size() must be size() - 1; a pool of 1 ignores the call.
  void warm(std::span<const WarmRange> per_worker);
  // Returns once no worker reads a warm() range any more (cutting an outstanding one short): for
  // a caller about to let the warmed memory go, or to end a step with nothing left running.
  void stop_warm();
  // Bytes the workers have read for warm() since the pool started (ranges cut short count what
  // was read), for tests and the bench.
  uint64_t warmed_bytes() const { return warmed_bytes_.load(std::memory_order_relaxed); }

 private:
  void worker(int index);
  void post_locked();       // publishes the job fields: pending_ = workers, generation_ + 1
  void wait_for_workers();  // until pending_ is 0 (each worker took the last posting)
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;  // written before generation_ moves
  int64_t n_ = 0;
  bool warm_job_ = false;                 // the posting is a warm() (ranges in warm_), not job_
  std::vector<WarmRange> warm_;           // per worker, written before generation_ moves
  bool warm_outstanding_ = false;         // caller only: a warm() posting may not be taken yet
  std::atomic<uint64_t> warm_sink_{0};    // what the warm reads fold into (so they are not elided)
  std::atomic<uint64_t> warmed_bytes_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace g4
