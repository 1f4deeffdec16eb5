/* A qemu TCG plugin that counts the guest instructions a run executes, exactly and the same on
 * every run, and prints "kiln instructions: N" on stderr at exit (with qemu's -d plugin). Given
 * symbols=FILE, a list of functions ("START SIZE NAME" per line, hexadecimal start and size, as
 * `arm-none-eabi-nm -S` gives them), it also prints "kiln function: N NAME" for each function
 * that ran, counting the instructions whose address lies in it.
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

KILN_EXPORT int qemu_plugin_version = 1;

typedef struct {
  uint64_t start, end, executed;
  char name[120];
} function_range;

static uint64_t executed;
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
  snprintf(line, sizeof line, "kiln instructions: %" PRIu64 "\n", executed);
  qemu_plugin_outs(line);
}

KILN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc,
                                    char** argv) {
  int i;
  (void)info;
  for (i = 0; i < argc; ++i) {
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
