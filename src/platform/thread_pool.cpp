#include "platform/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "platform/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace g4 {

namespace {
void range_of(int64_t n, int parts, int index, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, extra = n % parts;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until done() or kSpinMicros pass; returns done().
template <class Done>
bool spin_until(Done done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > limit) return done();
  }
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
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
    }
    // job_ and n_ were written before generation_ moved (release); this acquire load orders the
    // reads after them, so no lock is taken here: taking it cost about half of a hand-off's
    // latency. The caller cannot post the next job before this one's pending_ reaches zero.
    seen = generation_.load(std::memory_order_acquire);
    auto done = [&] {
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep: wake it under the lock
        done_cv_.notify_one();
      }
    };
    if (warm_job_) {
      // Take the range, let the caller post again at once, then read until done or until the
      // next posting moves generation_ (checked every 4 KiB).
      const WarmRange r = warm_[size_t(index - 1)];
      done();
      uint64_t sink = 0;
      size_t off = 0;
      for (; off < r.bytes; off += 64) {
        uint64_t v = 0;
        std::memcpy(&v, r.data + off, std::min<size_t>(sizeof v, r.bytes - off));
        sink ^= v;
        if ((off & 4095) == 4032 && generation_.load(std::memory_order_relaxed) != seen) {
          off += 64;
          break;
        }
      }
      warm_sink_.store(sink, std::memory_order_relaxed);  // keeps the loads
      warmed_bytes_.fetch_add(std::min(off, r.bytes), std::memory_order_relaxed);
      continue;
    }
    job = job_;
    n = n_;
    int64_t b, e;
    range_of(n, size(), index, &b, &e);
    if (b < e) (*job)(b, e, index);
    done();
  }
}

void ThreadPool::wait_for_workers() {
  if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::post_locked() {
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
}

void ThreadPool::warm(std::span<const WarmRange> per_worker) {
  if (workers_.empty()) return;
  if (per_worker.size() != workers_.size())
    throw Error("thread pool: warm() got " + std::to_string(per_worker.size()) + " ranges for " +
                std::to_string(workers_.size()) + " workers");
  if (warm_outstanding_) wait_for_workers();
  {
    std::lock_guard<std::mutex> lock(mu_);
    warm_.assign(per_worker.begin(), per_worker.end());
    warm_job_ = true;
    post_locked();
  }
  start_cv_.notify_all();
  warm_outstanding_ = true;
}

void ThreadPool::stop_warm() {
  if (warm_outstanding_) parallel_for(size(), [](int64_t, int64_t, int) {});  // a job every worker takes
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  if (warm_outstanding_) {  // each worker must have taken its warm range before the job fields change
    wait_for_workers();
    warm_outstanding_ = false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    warm_job_ = false;
    post_locked();
  }
  start_cv_.notify_all();
  int64_t b, e;
  range_of(n, size(), 0, &b, &e);
  if (b < e) fn(b, e, 0);
  wait_for_workers();
}

int64_t ThreadPool::share_begin(int64_t units, int64_t chunk, int threads, int t) {
  if (t >= threads) return units;
  const int64_t even = units * t / threads;
  return std::min(units, (even + chunk / 2) / chunk * chunk);
}

void ThreadPool::parallel_chunks(int64_t units, int64_t chunk, const std::function<void(int64_t, int64_t, int)>& fn,
                                 int64_t granule) {
  if (units <= 0) return;
  if (chunk < 1) throw Error("thread pool: chunk must be >= 1, got " + std::to_string(chunk));
  if (granule < 1) throw Error("thread pool: granule must be >= 1, got " + std::to_string(granule));
  if (chunk % granule)
    throw Error("thread pool: chunk " + std::to_string(chunk) + " is not a whole number of granules of " +
                std::to_string(granule));
  if (units >= (int64_t(1) << 32))
    throw Error("thread pool: " + std::to_string(units) + " units in one hand-off (at most 2^32 - 1)");
  const int threads = size();
  // Each share's remaining [front, back) in one word (front in the low half), so its owner (from
  // the front) and thieves (from the back) claim chunks with one compare-exchange each.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Share> shares(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    const int64_t b = share_begin(units, chunk, threads, t), e = share_begin(units, chunk, threads, t + 1);
    shares[size_t(t)].range.store(uint64_t(b) | (uint64_t(e) << 32), std::memory_order_relaxed);
  }
  parallel_for(threads, [&](int64_t own, int64_t, int thread) {
    for (int k = 0; k < threads; ++k) {  // k = 0: its own share; then the others', in turn
      std::atomic<uint64_t>& range = shares[size_t((own + k) % threads)].range;
      uint64_t v = range.load(std::memory_order_relaxed);
      for (;;) {
        const int64_t f = int64_t(v & 0xffffffffu), b = int64_t(v >> 32);
        if (f >= b) break;
        // Pieces shrink as a share runs out: a quarter of what is left for its owner, half for a
        // thief, at most `chunk`, whole granules (a thief's rounded up from 0). The threads then
        // finish within about a granule of each other instead of up to a whole chunk apart.
        const int64_t left = b - f;
        auto piece = [&](int64_t part) { return std::min(chunk, std::max(granule, part / granule * granule)); };
        const int64_t nf = k == 0 ? std::min(b, f + piece(left / 4)) : f;
        int64_t nb = b;
        if (k != 0) {
          nb = (b - piece(left / 2) + granule - 1) / granule * granule;
          if (nb >= b || nb < f) nb = f;
        }
        if (!range.compare_exchange_weak(v, uint64_t(nf) | (uint64_t(nb) << 32), std::memory_order_relaxed)) continue;
        if (k == 0) fn(f, nf, thread);
        else fn(nb, b, thread);
        v = range.load(std::memory_order_relaxed);
      }
    }
  });
}

}  // namespace g4
