// Runs work(t) for t = 0..threads-1 on that many fresh threads started together, and times it from
// the moment every thread is ready (spinning on one flag) to the moment the last one finishes, so
// thread start-up is not counted. What the machine measurements (memory-read bandwidth, FMA
// throughput) time their passes with.
#pragma once
#include <functional>

namespace g4 {

// Seconds from the common start to the last thread's end. threads >= 1 (the callers check).
double time_threads_together(int threads, const std::function<void(int)>& work);

}  // namespace g4
