/* A qemu TCG plugin that counts the guest instructions a run executes, exactly and the same on
 * every run, and prints "kiln instructions: N" on stderr at exit (with qemu's -d plugin). Given
 * symbols=FILE, a list of functions ("START SIZE NAME" per line, hexadecimal start and size, as
 * `arm-none-eabi-nm -S` gives them), it also prints "kiln function: N NAME" for each function
 * that ran, counting the instructions whose address lies in it. Given mix=1, it also prints
 * "kiln mix: CLASS N ..." (executed instructions per class: loads, ldrd, ldm, stores, multiplies,
 * divides, branches, floating point, the rest) and "kiln cycles (estimate): N", an estimate from
 * that mix with the Cortex-M4's documented timings (ARM DDI 0439B, 3.3): one cycle for ALU and
 * multiply-accumulate instructions (MUL, MLA, SMULL, SMLAL, SMLAD, ...), two for a load or store,
 * three for LDRD / STRD, 1 + N for LDM / STM / PUSH / POP of N registers, two for a branch (one
 * when not taken, 1 + a refill of 1 to 3 when taken: two is the middle), seven for SDIV / UDIV
 * (2 to 12), one for a floating-point instruction (VLDR / VSTR two, VDIV / VSQRT fourteen). An
 * estimate: loads that pipeline behind one another take one cycle, wait states are ignored.
 *
 * Build: cc -shared -fPIC -O2 -o insn_count.so scripts/qemu_insn_count.c
 * Use:   qemu-system-arm ... -plugin ./insn_count.so[,symbols=FILE] -d plugin
 *        (scripts/cortex_m4_run --count-instructions [--count-functions FILE] does this)
 *
 * Debian ships no qemu-plugin.h, so the few entry points this plugin calls are declared here, as
 * qemu 7.2 defines them (plugin API version 1). Each translated block adds its instruction count
 * to one counter, inline, every time it runs (and, with symbols, each instruction to its
 * function's): no callback per instruction, so the emulation stays fast. The counts are executed
 * instructions, not cycles. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KILN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op,
                                              void* ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn* insn,
                                                enum qemu_plugin_op op, void* ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);
void qemu_plugin_outs(const char* string);
char* qemu_plugin_insn_disas(const struct qemu_plugin_insn* insn);

KILN_EXPORT int qemu_plugin_version = 1;

typedef struct {
  uint64_t start, end, executed;
  char name[120];
} function_range;

static uint64_t executed;
static int with_mix; /* mix=1 */

/* The instruction classes of mix=1, and the estimate's cycles of one. */
enum {
  kLoad,
  kLoadPair,
  kLoadMany,
  kStore,
  kStorePair,
  kStoreMany,
  kMultiply,
  kDivide,
  kBranch,
  kFloat,
  kOther,
  kClasses
};
static const char* const kClassNames[kClasses] = {"load",   "ldrd",  "ldm",      "store",
                                                  "strd",   "stm",   "multiply", "divide",
                                                  "branch", "float", "other"};
static uint64_t class_executed[kClasses];
static uint64_t cycles;

static int starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The class of a disassembled instruction ("ldr r0, [r1]") and its estimated cycles. */
static int classify(const char* text, uint64_t* cost) {
  const char* regs = strchr(text, '{');
  uint64_t n = 1;
  if (regs) /* a register list: one more per comma */
    for (const char* c = regs; *c && *c != '}'; ++c) n += *c == ',';
  *cost = 1;
  if (starts_with(text, "v")) {
    if (starts_with(text, "vldr") || starts_with(text, "vstr")) *cost = 2;
    if (starts_with(text, "vdiv") || starts_with(text, "vsqrt")) *cost = 14;
    if (starts_with(text, "vpush") || starts_with(text, "vpop") || starts_with(text, "vldm") ||
        starts_with(text, "vstm"))
      *cost = 1 + n;
    return kFloat;
  }
  if (starts_with(text, "pop") || starts_with(text, "ldm")) {
    *cost = 1 + n;
    return kLoadMany;
  }
  if (starts_with(text, "push") || starts_with(text, "stm")) {
    *cost = 1 + n;
    return kStoreMany;
  }
  if (starts_with(text, "ldrd") || starts_with(text, "strd")) {
    *cost = 3;
    return text[0] == 'l' ? kLoadPair : kStorePair;
  }
  if (starts_with(text, "ldr") || starts_with(text, "ldrex")) {
    *cost = 2;
    return kLoad;
  }
  if (starts_with(text, "str")) {
    *cost = 2;
    return kStore;
  }
  if (starts_with(text, "sdiv") || starts_with(text, "udiv")) {
    *cost = 7;
    return kDivide;
  }
  if (starts_with(text, "mul") || starts_with(text, "mla") || starts_with(text, "mls") ||
      starts_with(text, "smul") || starts_with(text, "smla") || starts_with(text, "smls") ||
      starts_with(text, "smmul") || starts_with(text, "smml") || starts_with(text, "umul") ||
      starts_with(text, "umla") || starts_with(text, "umaal") || starts_with(text, "smuad") ||
      starts_with(text, "smusd"))
    return kMultiply;
  if ((text[0] == 'b' && !starts_with(text, "bic") && !starts_with(text, "bfi") &&
       !starts_with(text, "bfc") && !starts_with(text, "bkpt")) ||
      starts_with(text, "cbz") || starts_with(text, "cbnz") || starts_with(text, "tbb") ||
      starts_with(text, "tbh")) {
    *cost = 2;
    return kBranch;
  }
  return kOther;
}
static function_range* functions; /* sorted by start */
static size_t function_count;

static int by_start(const void* a, const void* b) {
  const function_range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static int read_symbols(const char* path) {
  FILE* f = fopen(path, "r");
  char line[256];
  size_t cap = 0;
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long long start, size;
    char name[120];
    if (sscanf(line, "%llx %llx %119s", &start, &size, name) != 3 || size == 0) continue;
    if (function_count == cap) {
      function_range* grown = realloc(functions, (cap = cap ? 2 * cap : 64) * sizeof *functions);
      if (!grown) break;
      functions = grown;
    }
    functions[function_count].start = start & ~1ull; /* a Thumb address's low bit */
    functions[function_count].end = (start & ~1ull) + size;
    functions[function_count].executed = 0;
    strcpy(functions[function_count].name, name);
    ++function_count;
  }
  fclose(f);
  qsort(functions, function_count, sizeof *functions, by_start);
  return 0;
}

static function_range* function_at(uint64_t address) {
  size_t lo = 0, hi = function_count;
  while (lo < hi) { /* the last function starting at or before address */
    size_t mid = (lo + hi) / 2;
    if (functions[mid].start <= address)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && address < functions[lo - 1].end ? &functions[lo - 1] : NULL;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  size_t i, n = qemu_plugin_tb_n_insns(tb);
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
  for (i = 0; with_mix && i < n; ++i) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    char* text = qemu_plugin_insn_disas(insn);
    uint64_t cost = 1;
    const int c = text ? classify(text, &cost) : kOther;
    free(text);
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &class_executed[c],
                                               1);
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &cycles, cost);
  }
  for (i = 0; function_count && i < n; ++i) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    function_range* f = function_at(qemu_plugin_insn_vaddr(insn));
    if (f)
      qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &f->executed, 1);
  }
}

static void report_at_exit(qemu_plugin_id_t id, void* userdata) {
  char line[192];
  size_t i;
  (void)id;
  (void)userdata;
  for (i = 0; i < function_count; ++i) {
    if (!functions[i].executed) continue;
    snprintf(line, sizeof line, "kiln function: %" PRIu64 " %s\n", functions[i].executed,
             functions[i].name);
    qemu_plugin_outs(line);
  }
  if (with_mix) {
    char mix[512] = "kiln mix:";
    for (i = 0; i < kClasses; ++i) {
      snprintf(line, sizeof line, " %s %" PRIu64, kClassNames[i], class_executed[i]);
      strncat(mix, line, sizeof mix - strlen(mix) - 1);
    }
    strncat(mix, "\n", sizeof mix - strlen(mix) - 1);
    qemu_plugin_outs(mix);
    snprintf(line, sizeof line, "kiln cycles (estimate): %" PRIu64 "\n", cycles);
    qemu_plugin_outs(line);
  }
  snprintf(line, sizeof line, "kiln instructions: %" PRIu64 "\n", executed);
  qemu_plugin_outs(line);
}

KILN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc,
                                    char** argv) {
  int i;
  (void)info;
  for (i = 0; i < argc; ++i) {
    if (strcmp(argv[i], "mix=1") == 0) with_mix = 1;
    if (strncmp(argv[i], "symbols=", 8) != 0) continue;
    if (read_symbols(argv[i] + 8) != 0) {
      fprintf(stderr, "qemu_insn_count: cannot read %s\n", argv[i] + 8);
      return -1;
    }
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
  return 0;
}
