// The one process-wide pool of worker threads behind the host kernels' `threads` argument
// (GEMM, depthwise conv, GEMV, and oneDNN's primitives, one per part: kernels/dnnl/conv_dnnl.h).
// Workers are created on first use and persist; the pool grows to the largest `threads` any
// call asked for (at most kMaxThreads) and never shrinks.
//
// ParallelFor(threads, n, fn) splits [0, n) into min(threads, n) contiguous chunks of nearly
// equal size (chunk c is [c * n / t, (c + 1) * n / t)), runs fn(begin, end) once per chunk on the
// calling thread plus up to t - 1 workers, and returns when every chunk is done, so at most
// `threads` threads work for one call. It never nests or oversubscribes: a ParallelFor called
// from inside a chunk (on the caller or a worker), or while another thread's ParallelFor holds
// the pool, runs all its chunks inline on the calling thread, in chunk order. Which thread runs
// a chunk is not fixed, so fn must not depend on it; the chunk boundaries depend only on
// (threads, n). fn must not throw. Idle workers spin for a few microseconds before sleeping on
// a condition variable. A child process after fork() gets a fresh, empty pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace kiln::ops {

inline constexpr int kMaxThreads = 64;

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
void ParallelForImpl(int threads, int64_t n, ChunkFn fn, void* ctx);
}  // namespace detail

template <class F>
void ParallelFor(int threads, int64_t n, F&& fn) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    fn(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::ParallelForImpl(
      threads, n, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

// Where the members of one ParallelTeam wait for each other: Wait returns once every member has
// called it, and the last to arrive runs `last` first (the step's shared bookkeeping, such as
// swapping the state buffers), so every member sees its effects.
class TeamBarrier {
 public:
  explicit TeamBarrier(int members) : members_(members) {}
  template <class F>
  void Wait(F&& last) {
    const uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 < members_)
      return AwaitPhaseAfter(phase);
    last();
    arrived_.store(0, std::memory_order_relaxed);
    phase_.store(phase + 1, std::memory_order_release);
  }
  void Wait() {
    Wait([] {});
  }

 private:
  void AwaitPhaseAfter(uint32_t phase) const;
  const int members_;
  std::atomic<int> arrived_{0};
  std::atomic<uint32_t> phase_{0};
};

namespace detail {
using TeamFn = void (*)(void* ctx, int member, int members, TeamBarrier& barrier);
void ParallelTeamImpl(int threads, TeamFn fn, void* ctx);
}  // namespace detail

// For work whose threads must meet many times (a recurrent network's steps), where a ParallelFor
// per meeting would cost a dispatch and a join each: runs fn(member, members, barrier) once for
// each member in [0, members), all at the same time, so they may wait for each other at the
// barrier. members is min(threads, kMaxThreads) where the pool is free for the call, else 1 (inside
// another ParallelFor or team, while another thread holds the pool, under the reference
// kernels), so fn must split its work by `members`, not by `threads`.
template <class F>
void ParallelTeam(int threads, F&& fn) {
  using Fn = std::remove_reference_t<F>;
  detail::ParallelTeamImpl(
      threads,
      [](void* ctx, int member, int members, TeamBarrier& barrier) {
        (*static_cast<Fn*>(ctx))(member, members, barrier);
      },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

namespace detail {
// How many parts ParallelSlices and ParallelRows split n items into: at most `threads`, each of at
// least `min_per_thread` items.
inline int64_t PartCount(int threads, int64_t n, int64_t min_per_thread) {
  const int64_t t = min_per_thread > 0 ? n / min_per_thread : n;
  return t < threads ? t : threads;
}
}  // namespace detail

// For element-wise and row-wise kernels: fn(begin, end) over [0, n) in at most `threads` slices
// of at least `min_per_thread` items each (one slice, on the caller, when n is smaller), slice
// bounds on multiples of 16 (a vector kernel's tails stay at the end). Items are independent, so
// the result does not depend on the split.
template <class F>
void ParallelSlices(int threads, int64_t n, int64_t min_per_thread, F&& fn) {
  const int64_t t = detail::PartCount(threads, n, min_per_thread);
  if (t <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  ParallelFor(static_cast<int>(t), t, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c == 0 ? 0 : (c * n / t) & ~int64_t{15};
      const int64_t e = c + 1 == t ? n : ((c + 1) * n / t) & ~int64_t{15};
      if (e > b) fn(b, e);
    }
  });
}

// For kernels over independent rows (planes, groups, channels): fn(begin, end) over [0, n) in
// at most `threads` contiguous parts of nearly equal size and at least `min_per_thread` rows each
// (one part, on the caller, when n is smaller). Unlike ParallelSlices, no rounding to 16: eight
// rows split 4 + 4, not 0 + 8.
template <class F>
void ParallelRows(int threads, int64_t n, int64_t min_per_thread, F&& fn) {
  const int64_t t = detail::PartCount(threads, n, min_per_thread);
  if (t <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  ParallelFor(static_cast<int>(t), n, std::forward<F>(fn));
}

// The number of worker threads the pool holds now (tests).
int ThreadPoolWorkers();

}  // namespace kiln::ops
