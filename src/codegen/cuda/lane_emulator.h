/* The lane-accurate CPU emulation of kiln's CUDA kernels (--target cuda). kiln embeds this file in
 * every generated NAME.cu, where a host C++ compiler (not nvcc) uses it.
 *
 * Threads and scheduling:
 *   - Each CUDA thread of a block runs as a fiber (ucontext) on one OS thread.
 *   - A scheduler runs every fiber until it reaches a warp collective (mma.sync, ldmatrix,
 *     __shfl_sync, __syncwarp) or the block barrier (__syncthreads).
 *   - It executes a collective once all 32 lanes of the warp have arrived at the same one. Each
 *     lane's registers hold their fragments in the PTX ISA's layouts.
 *   - The schedule is deterministic.
 *
 * Shared memory is checked:
 *   - Every byte carries a tag: its last writer and last readers, with the barrier epochs of their
 *     accesses.
 *   - An access that no barrier orders after a conflicting access of another thread is reported
 *     as a race: a read after a write (RAW), a write after a write (WAW), a write after a read
 * (WAR).
 *   - A __syncwarp orders the lanes of its warp; a __syncthreads orders the block.
 *   - Reads of bytes never written, and shared accesses outside the block's shared memory or
 *     misaligned, are reported too.
 *   - A warp collective that some lane of the warp never reaches is reported as a deadlock.
 *
 * Not modelled: global-memory races, warp divergence within a collective's operands, and timing. */
#ifndef KILN_LANE_EMULATOR_H_
#define KILN_LANE_EMULATOR_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_EMU_ASAN 1
#endif
#endif
#ifdef KILN_EMU_ASAN
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                               size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                                size_t* size_old);
#endif

namespace kiln_emu {

struct Dim3 {
  unsigned x, y, z;
};

enum class Op { kRun, kSyncWarp, kSyncThreads, kMma, kLdsm, kShfl, kDone };

inline const char* OpName(Op op) {
  switch (op) {
    case Op::kRun:
      return "running";
    case Op::kSyncWarp:
      return "__syncwarp";
    case Op::kSyncThreads:
      return "__syncthreads";
    case Op::kMma:
      return "mma.sync";
    case Op::kLdsm:
      return "ldmatrix";
    case Op::kShfl:
      return "__shfl_sync";
    case Op::kDone:
      return "exited";
  }
  return "?";
}

/* IEEE half <-> float, round to nearest even (as cvt.rn.f16.f32). */
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (mag < 0x38800000u) {                                   /* subnormal or zero */
    float a = fabsf(f) * 16777216.0f;                        /* units of 2^-24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(a));
  }
  uint32_t h = ((mag >> 13) - (112u << 10)), rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  float v;
  if (e == 0)
    v = ldexpf((float)m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = ldexpf((float)(m | 1024u), (int)e - 25);
  uint32_t bits;
  memcpy(&bits, &v, 4);
  bits |= sign;
  memcpy(&v, &bits, 4);
  return v;
}

/* E4M3 (OCP FP8: bias 7, no infinities, S.1111.111 is NaN) to float. */
inline float E4M3ToFloat(uint8_t code) {
  int e = (code >> 3) & 15, m = code & 7;
  float v = e == 15 && m == 7 ? NAN
            : e == 0          ? ldexpf((float)m, -9)
                              : ldexpf((float)(8 + m), e - 10);
  return (code & 0x80) ? -v : v;
}

struct Thread {
  ucontext_t context;
  char* stack = nullptr;
  Op op = Op::kRun;
  /* The pending collective's operands. */
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0};
  float* d = nullptr;
  uint32_t* r = nullptr;
  const void* address = nullptr;
  int count = 0, source = 0;
  uint32_t value = 0;
#ifdef KILN_EMU_ASAN
  void* fake_stack = nullptr;
#endif
};

/* Per byte of shared memory: the last write and the reads since, with the epochs they ran in. */
struct Tag {
  int32_t writer = -1; /* thread; -1: never written */
  uint32_t writer_block_epoch = 0, writer_warp_epoch = 0;
  int32_t reader = -1;      /* thread; -1: none, -2: several */
  int32_t reader_warp = -1; /* -2: several warps */
  uint32_t reader_block_epoch = 0, reader_warp_epoch = 0;
};

class Emulator {
 public:
  static Emulator& Get() {
    static Emulator e;
    return e;
  }

  /* Runs kernel() as `blocks` blocks of `threads` threads (a multiple of 32) with `shared` bytes
   * of dynamic shared memory, block after block. Returns the number of problems found in all
   * launches so far (report() tells them). */
  int Launch(unsigned blocks, unsigned threads, size_t shared,
             const std::function<void()>& kernel) {
    if (threads == 0 || threads % 32 != 0 || threads > 1024) {
      Problem("a block of " + std::to_string(threads) +
              " threads: the emulation takes whole warps, at most 1024 threads");
      return problems_;
    }
    kernel_ = &kernel;
    grid_ = {blocks, 1, 1};
    block_dim_ = {threads, 1, 1};
    threads_.assign(threads, Thread());
    stacks_.resize((size_t)threads * kStackBytes);
    for (unsigned b = 0; b < blocks; ++b) {
      block_ = b;
      smem_.assign(shared, 0xa5); /* garbage that reads of unwritten bytes would see */
      tags_.assign(shared, Tag());
      warp_epoch_.assign(threads / 32, 0);
      block_epoch_ = 0;
      RunBlock();
    }
    kernel_ = nullptr;
    return problems_;
  }

  Dim3 thread_idx() const { return {(unsigned)current_, 0, 0}; }
  Dim3 block_idx() const { return {block_, 0, 0}; }
  Dim3 block_dim() const { return block_dim_; }
  Dim3 grid_dim() const { return grid_; }
  unsigned char* shared_memory() { return smem_.data(); }
  int problems() const { return problems_; }
  const std::string& report() const { return report_; }
  void Reset() {
    problems_ = 0;
    report_.clear();
  }

  /* The calling thread waits for its warp (or block) at op; the operands are in Self(). */
  Thread& Self() { return threads_[(size_t)current_]; }
  void Wait(Op op) {
    Thread& t = Self();
    t.op = op;
    SwitchToScheduler(t);
  }

  /* Checks and records a shared-memory access of `bytes` bytes at p by thread `thread`. */
  void Access(const void* p, size_t bytes, size_t align, bool write, int thread) {
    const unsigned char* q = (const unsigned char*)p;
    if (q < smem_.data() || q + bytes > smem_.data() + smem_.size()) {
      Problem(Who(thread) + (write ? " writes " : " reads ") + std::to_string(bytes) +
              " bytes outside the block's " + std::to_string(smem_.size()) +
              " bytes of shared memory");
      return;
    }
    size_t at = (size_t)(q - smem_.data());
    if (at % align != 0)
      Problem(Who(thread) + (write ? " writes" : " reads") + " shared byte " + std::to_string(at) +
              ", not " + std::to_string(align) + "-byte aligned");
    for (size_t k = at; k < at + bytes; ++k) {
      Tag& tag = tags_[k];
      if (write) {
        if (tag.writer >= 0 &&
            !Ordered(tag.writer, tag.writer_block_epoch, tag.writer_warp_epoch, thread)) {
          Race("WAW", thread, tag.writer, k);
          return;
        }
        if (tag.reader != -1 && !ReadsOrdered(tag, thread)) {
          Race("WAR", thread, tag.reader, k);
          return;
        }
        tag.writer = thread;
        tag.writer_block_epoch = block_epoch_;
        tag.writer_warp_epoch = warp_epoch_[(size_t)thread / 32];
        tag.reader = -1;
        continue;
      }
      if (tag.writer < 0) {
        Problem(Who(thread) + " reads shared byte " + std::to_string(k) +
                ", which no thread has written");
        return;
      }
      if (!Ordered(tag.writer, tag.writer_block_epoch, tag.writer_warp_epoch, thread)) {
        Race("RAW", thread, tag.writer, k);
        return;
      }
      AddReader(tag, thread);
    }
  }

 private:
  static constexpr size_t kStackBytes = 512 * 1024;

  std::string Who(int thread) const {
    return "block " + std::to_string(block_) + " thread " + std::to_string(thread) + " (warp " +
           std::to_string(thread / 32) + " lane " + std::to_string(thread % 32) + ")";
  }

  void Problem(const std::string& what) {
    if (problems_++ < 20) report_ += what + "\n";
  }

  void Race(const char* kind, int thread, int other, size_t byte) {
    Problem(std::string("shared-memory race (") + kind + "): " + Who(thread) + " and " +
            (other == -2 ? std::string("several threads") : Who(other)) + " access shared byte " +
            std::to_string(byte) + " with no barrier between");
  }

  /* Is an access by thread `prior` in those epochs ordered before the current one of `thread`? */
  bool Ordered(int prior, uint32_t block_epoch, uint32_t warp_epoch, int thread) const {
    if (prior == thread || block_epoch < block_epoch_) return true;
    return prior / 32 == thread / 32 && warp_epoch < warp_epoch_[(size_t)thread / 32];
  }

  bool ReadsOrdered(const Tag& tag, int thread) const {
    if (tag.reader >= 0)
      return Ordered(tag.reader, tag.reader_block_epoch, tag.reader_warp_epoch, thread);
    if (tag.reader_block_epoch < block_epoch_) return true;
    return tag.reader_warp == thread / 32 &&
           tag.reader_warp_epoch < warp_epoch_[(size_t)thread / 32];
  }

  void AddReader(Tag& tag, int thread) {
    bool replace = tag.reader == -1 ||
                   (tag.reader >= 0 &&
                    Ordered(tag.reader, tag.reader_block_epoch, tag.reader_warp_epoch, thread));
    if (replace) {
      tag.reader = thread;
      tag.reader_warp = thread / 32;
    } else if (tag.reader != thread) {
      if (tag.reader_warp != thread / 32) tag.reader_warp = -2;
      tag.reader = -2;
    }
    tag.reader_block_epoch = block_epoch_;
    tag.reader_warp_epoch = warp_epoch_[(size_t)thread / 32];
  }

  static void Trampoline() {
    Emulator& e = Get();
#ifdef KILN_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &e.main_bottom_, &e.main_size_);
#endif
    (*e.kernel_)();
    e.Self().op = Op::kDone;
#ifdef KILN_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, e.main_bottom_, e.main_size_);
#endif
  } /* returns to uc_link: the scheduler */

  void SwitchToThread(int k) {
    current_ = k;
    Thread& t = threads_[(size_t)k];
#ifdef KILN_EMU_ASAN
    void* save = nullptr;
    __sanitizer_start_switch_fiber(&save, t.stack, kStackBytes);
#endif
    swapcontext(&scheduler_, &t.context);
#ifdef KILN_EMU_ASAN
    __sanitizer_finish_switch_fiber(save, nullptr, nullptr);
#endif
  }

  void SwitchToScheduler(Thread& t) {
#ifdef KILN_EMU_ASAN
    __sanitizer_start_switch_fiber(&t.fake_stack, main_bottom_, main_size_);
#endif
    swapcontext(&t.context, &scheduler_);
#ifdef KILN_EMU_ASAN
    __sanitizer_finish_switch_fiber(t.fake_stack, &main_bottom_, &main_size_);
#endif
  }

  void RunBlock() {
    int n = (int)threads_.size();
    for (int k = 0; k < n; ++k) {
      Thread& t = threads_[(size_t)k];
      t = Thread();
      t.stack = stacks_.data() + (size_t)k * kStackBytes;
      getcontext(&t.context);
      t.context.uc_stack.ss_sp = t.stack;
      t.context.uc_stack.ss_size = kStackBytes;
      t.context.uc_link = &scheduler_;
      makecontext(&t.context, &Emulator::Trampoline, 0);
    }
    for (;;) {
      for (int k = 0; k < n; ++k)
        if (threads_[(size_t)k].op == Op::kRun) SwitchToThread(k);
      bool progress = false, done = true;
      for (int w = 0; w < n / 32; ++w) progress = ResolveWarp(w) || progress;
      int waiting_block = 0, live = 0;
      for (const Thread& t : threads_) {
        if (t.op == Op::kDone) continue;
        ++live;
        done = false;
        waiting_block += t.op == Op::kSyncThreads;
      }
      if (done) return;
      if (!progress && waiting_block == live) { /* exited threads count as arrived */
        ++block_epoch_;
        for (Thread& t : threads_)
          if (t.op == Op::kSyncThreads) t.op = Op::kRun;
        progress = true;
      }
      if (!progress) {
        Deadlock();
        return;
      }
    }
  }

  void Deadlock() {
    std::string what = "deadlock in block " + std::to_string(block_) + ":";
    for (size_t w = 0; w < threads_.size() / 32; ++w) {
      what += " warp " + std::to_string(w) + " [";
      for (int l = 0; l < 32; ++l)
        what += std::string(l ? " " : "") + OpName(threads_[w * 32 + (size_t)l].op);
      what += "]";
    }
    Problem(what);
  }

  /* Executes warp w's collective when all its lanes wait at the same one. */
  bool ResolveWarp(int w) {
    Thread* lanes = &threads_[(size_t)w * 32];
    Op op = lanes[0].op;
    /* Lanes that differ (some at a collective, others not) are a deadlock RunBlock reports. */
    if (op == Op::kRun || op == Op::kDone || op == Op::kSyncThreads) return false;
    for (int l = 1; l < 32; ++l)
      if (lanes[l].op != op) return false;
    switch (op) {
      case Op::kSyncWarp:
        ++warp_epoch_[(size_t)w];
        break;
      case Op::kMma:
        Mma(lanes);
        break;
      case Op::kLdsm:
        Ldsm(lanes, w);
        break;
      case Op::kShfl:
        for (int l = 0; l < 32; ++l) lanes[l].b[0] = lanes[lanes[l].source & 31].value;
        for (int l = 0; l < 32; ++l) lanes[l].value = lanes[l].b[0];
        break;
      default:
        break;
    }
    for (int l = 0; l < 32; ++l) lanes[l].op = Op::kRun;
    return true;
  }

  /* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, with the operand layouts of the PTX ISA:
   * g = lane / 4, t = lane % 4;
   *   A (16 x 16, four .f16x2): register i, half h: row g + 8 (i % 2), column 2t + h + 8 (i / 2);
   *   B (16 x 8, two .f16x2):   register i, half h: row (k) 2t + h + 8i, column (n) g;
   *   C, D (16 x 8, four .f32): element i: row g + 8 (i / 2), column 2t + i % 2. */
  static void Mma(Thread* lanes) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int i = 0; i < 4; ++i)
        for (int h = 0; h < 2; ++h)
          A[g + 8 * (i & 1)][2 * t + h + 8 * (i >> 1)] =
              HalfToFloat((uint16_t)(lanes[l].a[i] >> (16 * h)));
      for (int i = 0; i < 2; ++i)
        for (int h = 0; h < 2; ++h)
          B[2 * t + h + 8 * i][g] = HalfToFloat((uint16_t)(lanes[l].b[i] >> (16 * h)));
      for (int i = 0; i < 4; ++i) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = lanes[l].c[i];
    }
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int i = 0; i < 4; ++i) {
        int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float acc = C[row][col];
        for (int k = 0; k < 16; ++k) acc = fmaf(A[row][k], B[k][col], acc);
        lanes[l].d[i] = acc;
      }
    }
  }

  /* ldmatrix.sync.aligned.m8n8.xN.shared.b16: lane 8j + r gives the address of row r of matrix j
   * (16 bytes, 16-byte aligned); lane l receives, of matrix j, the 32 bits at row l / 4, bytes
   * 4 (l % 4) .. 4 (l % 4) + 3. */
  void Ldsm(Thread* lanes, int w) {
    int count = lanes[0].count;
    for (int l = 1; l < 32; ++l)
      if (lanes[l].count != count) {
        Problem("warp " + std::to_string(w) + ": ldmatrix with different matrix counts per lane");
        return;
      }
    const unsigned char* rows[32];
    for (int j = 0; j < count; ++j)
      for (int r = 0; r < 8; ++r) {
        int l = 8 * j + r;
        rows[l] = (const unsigned char*)lanes[l].address;
        Access(rows[l], 16, 16, false, w * 32 + l);
      }
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < count; ++j) {
        const unsigned char* row = rows[8 * j + (l >> 2)];
        bool inside = row >= smem_.data() && row + 16 <= smem_.data() + smem_.size();
        uint32_t v = 0;
        if (inside) memcpy(&v, row + 4 * (l & 3), 4);
        lanes[l].r[j] = v;
      }
  }

  const std::function<void()>* kernel_ = nullptr;
  std::vector<Thread> threads_;
  std::vector<char> stacks_;
  ucontext_t scheduler_;
  int current_ = 0;
  unsigned block_ = 0;
  Dim3 grid_ = {1, 1, 1}, block_dim_ = {32, 1, 1};
  std::vector<unsigned char> smem_;
  std::vector<Tag> tags_;
  std::vector<uint32_t> warp_epoch_;
  uint32_t block_epoch_ = 0;
  int problems_ = 0;
  std::string report_;
#ifdef KILN_EMU_ASAN
  const void* main_bottom_ = nullptr;
  size_t main_size_ = 0;
#endif
};

/* What the generated code calls in place of CUDA's built-ins and inline PTX. */
inline void SyncThreads() { Emulator::Get().Wait(Op::kSyncThreads); }
inline void SyncWarp() { Emulator::Get().Wait(Op::kSyncWarp); }
inline void Mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  Thread& t = Emulator::Get().Self();
  for (int i = 0; i < 4; ++i) t.a[i] = a[i];
  t.b[0] = b0;
  t.b[1] = b1;
  for (int i = 0; i < 4; ++i) t.c[i] = c[i];
  t.d = c;
  Emulator::Get().Wait(Op::kMma);
}
inline void LdMatrix(uint32_t* r, const void* row_address, int count) {
  Thread& t = Emulator::Get().Self();
  t.r = r;
  t.address = row_address;
  t.count = count;
  Emulator::Get().Wait(Op::kLdsm);
}
inline uint32_t Shfl(uint32_t value, int source) {
  Thread& t = Emulator::Get().Self();
  t.value = value;
  t.source = source;
  Emulator::Get().Wait(Op::kShfl);
  return Emulator::Get().Self().value;
}
inline void SharedStore(void* p, const void* src, size_t bytes) {
  Emulator& e = Emulator::Get();
  e.Access(p, bytes, bytes, true, (int)e.thread_idx().x);
  memcpy(p, src, bytes);
}
inline void SharedLoad(void* dst, const void* p, size_t bytes) {
  Emulator& e = Emulator::Get();
  e.Access(p, bytes, bytes, false, (int)e.thread_idx().x);
  memcpy(dst, p, bytes);
}

}  // namespace kiln_emu

#endif /* KILN_LANE_EMULATOR_H_ */
