#include "kernels/x86/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/x86/cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_POOL_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define KILN_POOL_PAUSE() asm volatile("yield")
#else
#define KILN_POOL_PAUSE() ((void)0)
#endif

namespace kiln::ops {
namespace {

// How long a worker or a waiting caller spins before it sleeps. Waking a sleeping worker costs
// tens of microseconds on a VM; a network's single-threaded stretches between parallel nodes
// (a MobileNetV3's squeeze-excitation blocks) outlasted the 48 us that 4096 pauses took on one
// CPU (MobileNetV3-Large at two threads 4.3 -> 3.8 ms with 200 us). A time, not a count: a
// pause takes 12 ns on one CPU and 45 on another.
constexpr auto kSpinTime = std::chrono::microseconds(200);

// Pauses until done() or kSpinTime has passed; the result of the last done().
template <class F>
bool SpinUntil(F&& done) {
  const auto end = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      KILN_POOL_PAUSE();
    }
    if (std::chrono::steady_clock::now() >= end) return done();
  }
}

// True on pool workers and on a caller while it runs a job: a ParallelFor there runs inline.
thread_local bool t_inside = false;

// One job at a time (job_mu_ is held by its caller from posting to completion). The job's
// generation, chunk count and next unclaimed chunk share one atomic word, so a worker that wakes
// late can only claim chunks of the job it saw, never of a later one: a claim is a
// compare-and-swap of (gen, chunks, next) to (gen, chunks, next + 1) with next < chunks, which
// also means the job is still in flight. fn_ / ctx_ / n_ are written before the word is published
// and stay fixed until every chunk of that job is done; a worker reads them only after a claim.
class Pool {
 public:
  // Runs the job; false if the pool is busy with another caller's job (run it inline then).
  bool Run(int t, int64_t n, detail::ChunkFn fn, void* ctx) {
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    Grow(t - 1);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t gen = ((state_.load(std::memory_order_relaxed) >> 32) + 1) & 0xffffffffu;
    {
      std::lock_guard<std::mutex> lock(mu_);
      state_.store(gen << 32 | static_cast<uint64_t>(t) << 16, std::memory_order_release);
    }
    wake_.notify_all();
    t_inside = true;
    Work(gen);
    t_inside = false;
    // Wait for the chunks workers claimed: spin, then sleep.
    if (!SpinUntil([&] { return done_.load(std::memory_order_acquire) >= t; })) {
      std::unique_lock<std::mutex> lock(mu_);
      finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) >= t; });
    }
    return true;
  }

  int Workers() {
    std::lock_guard<std::mutex> lock(job_mu_);
    return static_cast<int>(workers_);
  }

 private:
  // Claims and runs chunks of job `gen` until none is left.
  void Work(uint64_t gen) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if ((s >> 32) != gen) return;
      const int64_t chunks = static_cast<int64_t>((s >> 16) & 0xffffu);
      const int64_t c = static_cast<int64_t>(s & 0xffffu);
      if (c >= chunks) return;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;
      fn_(ctx_, c * n_ / chunks, (c + 1) * n_ / chunks);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu_);
        finished_.notify_all();
      }
      s = state_.load(std::memory_order_acquire);
    }
  }

  void Grow(int want) {  // job_mu_ held
    want = std::min(want, kMaxThreads - 1);
    while (static_cast<int>(workers_) < want) {
      // The worker waits for a generation after the current one (the job about to be posted).
      const uint64_t seen = state_.load(std::memory_order_relaxed) >> 32;
      std::thread([this, seen] { WorkerLoop(seen); }).detach();
      ++workers_;
    }
  }

  void WorkerLoop(uint64_t seen) {
    t_inside = true;
    for (;;) {
      uint64_t gen = seen;
      SpinUntil([&] { return (gen = state_.load(std::memory_order_acquire) >> 32) != seen; });
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return (state_.load(std::memory_order_acquire) >> 32) != seen; });
        gen = state_.load(std::memory_order_acquire) >> 32;
      }
      seen = gen;
      Work(gen);
    }
  }

  std::mutex job_mu_;  // held by the caller of the job in flight
  size_t workers_ = 0;
  std::mutex mu_;  // guards sleeping on wake_ / finished_
  std::condition_variable wake_, finished_;
  std::atomic<uint64_t> state_{0};  // generation << 32 | chunks << 16 | next unclaimed chunk
  std::atomic<int64_t> done_{0};
  detail::ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
};

// The pool is never destroyed: its workers are detached and sleep through process exit. After
// fork() the child has none of the parent's threads (and maybe a held mutex), so it starts a new
// pool; the parent's copy stays reachable through `g_stale` (no leak report).
std::atomic<Pool*> g_pool{nullptr};
std::vector<Pool*>* g_stale = nullptr;
std::once_flag g_atfork_once;

void ForgetPoolInChild() {
  Pool* old = g_pool.exchange(nullptr);
  if (old) {
    if (!g_stale) g_stale = new std::vector<Pool*>;
    g_stale->push_back(old);
  }
}

Pool& ThePool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, ForgetPoolInChild); });
  Pool* fresh = new Pool;
  if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *p;
}

}  // namespace

namespace detail {

void ParallelForImpl(int threads, int64_t n, ChunkFn fn, void* ctx) {
  const int t = static_cast<int>(std::min<int64_t>({threads, n, kMaxThreads}));
  // The reference kernels run on one thread (kernels/x86/cpu_isa.h), so a worker never runs one of
  // their chunks without knowing it.
  if (t <= 1 || t_inside || ReferenceKernels() || !ThePool().Run(t, n, fn, ctx)) {
    // Inline, with the same chunk boundaries.
    for (int64_t c = 0; c < t; ++c) fn(ctx, c * n / t, (c + 1) * n / t);
  }
}

void ParallelTeamImpl(int threads, TeamFn fn, void* ctx) {
  const int t = std::min(threads, kMaxThreads);
  if (t > 1 && !t_inside && !ReferenceKernels()) {
    // Run gives each of the t chunks its own thread: a member waits at the barrier until all
    // have arrived, so no thread can finish one chunk and claim a second.
    TeamBarrier barrier(t);
    struct Team {
      TeamFn fn;
      void* ctx;
      int members;
      TeamBarrier* barrier;
    } team{fn, ctx, t, &barrier};
    const ChunkFn member = [](void* c, int64_t m, int64_t) {
      const Team& tm = *static_cast<const Team*>(c);
      tm.fn(tm.ctx, static_cast<int>(m), tm.members, *tm.barrier);
    };
    if (ThePool().Run(t, t, member, &team)) return;
  }
  TeamBarrier alone(1);
  fn(ctx, 0, 1, alone);
}

}  // namespace detail

void TeamBarrier::AwaitPhaseAfter(uint32_t phase) const {
  // Members arrive microseconds apart; past the spin, yield rather than sleep (a member may be
  // waiting for a core).
  if (SpinUntil([&] { return phase_.load(std::memory_order_acquire) != phase; })) return;
  while (phase_.load(std::memory_order_acquire) == phase) std::this_thread::yield();
}

int ThreadPoolWorkers() { return ThePool().Workers(); }

}  // namespace kiln::ops
