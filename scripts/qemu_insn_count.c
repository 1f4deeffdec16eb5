/* A qemu TCG plugin that counts the guest instructions a run executes, exactly and the same on
 * every run, and prints "kiln instructions: N" on stderr at exit (with qemu's -d plugin).
 *
 * Build: cc -shared -fPIC -O2 -o insn_count.so scripts/qemu_insn_count.c
 * Use:   qemu-system-arm ... -plugin ./insn_count.so -d plugin
 *        (scripts/cortex_m4_run --count-instructions builds and loads it)
 *
 * Debian ships no qemu-plugin.h, so the few entry points this plugin calls are declared here, as
 * qemu 7.2 defines them (plugin API version 1). Each translated block adds its instruction count
 * to one counter, inline, every time it runs: no callback per instruction, so the emulation stays
 * fast. The counts are executed instructions, not cycles. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KILN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op,
                                              void* ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);
void qemu_plugin_outs(const char* string);

KILN_EXPORT int qemu_plugin_version = 1;

static uint64_t executed;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed,
                                           qemu_plugin_tb_n_insns(tb));
}

static void on_exit(qemu_plugin_id_t id, void* userdata) {
  char line[64];
  (void)id;
  (void)userdata;
  snprintf(line, sizeof line, "kiln instructions: %" PRIu64 "\n", executed);
  qemu_plugin_outs(line);
}

KILN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc,
                                    char** argv) {
  (void)info;
  (void)argc;
  (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_exit, NULL);
  return 0;
}
