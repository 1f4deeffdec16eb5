/* Minimal Cortex-M4 startup for running newlib (rdimon, semihosting) programs on
 * qemu-system-arm -M mps2-an386 (and a Cortex-M7 on mps2-an500, the same memory map below the
 * PSRAM). Linked by scripts/cortex_m4_run with
 * -Wl,--section-start=.kiln_vectors=0x0.
 *
 * newlib's default link puts code at 0x8000 and has no Cortex-M vector table, so this file adds
 * one at address 0: the initial stack pointer (top of the 4 MB data RAM at 0x20000000; newlib's
 * _start then moves the stack where semihosting SYS_HEAPINFO says: the top of the 16 MB PSRAM),
 * the reset handler (enables the FPU, then calls _start) and one handler for every fault. A fault
 * prints one line through semihosting SYS_WRITE0 (not newlib: its state may be what broke) and ends
 * qemu with exit status KILN_M4_FAULT_EXIT (SYS_EXIT_EXTENDED), so a crash never hangs the run. */
#include <stdint.h>

#define KILN_M4_FAULT_EXIT 99 /* scripts/cortex_m4_run documents this status */

extern void _start(void); /* newlib crt0 (rdimon): sets up stack, heap, argv; calls main, exit */

void kiln_m4_reset_handler(void);
void kiln_m4_fault_handler(void);
void kiln_m4_fault_report(const uint32_t* frame);

/* Semihosting call: BKPT 0xAB with the operation in r0 and the argument in r1. */
static uint32_t kiln_m4_semihost(uint32_t op, const void* arg) {
  register uint32_t r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static void kiln_m4_write_hex(char* out, uint32_t v) {
  int i;
  for (i = 0; i < 8; ++i) out[i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xfu];
}

void kiln_m4_reset_handler(void) {
  /* CPACR (0xE000ED88): full access to coprocessors 10 and 11 (the FPU), bits 20-23. Without it
   * the first floating-point instruction faults (qemu: "Lockup"). */
  *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");
  _start();
  for (;;) {
  }
}

/* Fault entry: hands the exception frame (on MSP or PSP, as EXC_RETURN bit 2 in LR says) to
 * kiln_m4_fault_report. */
__attribute__((naked)) void kiln_m4_fault_handler(void) {
  __asm__ volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "b kiln_m4_fault_report\n\t");
}

/* Prints "kiln cortex_m4: fault, exception NN, pc 0x........, cfsr 0x........" and exits. */
void kiln_m4_fault_report(const uint32_t* frame) {
  static char msg[] = "kiln cortex_m4: fault, exception NN, pc 0x________, cfsr 0x________\n";
  static const uint32_t exit_block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */,
                                         KILN_M4_FAULT_EXIT};
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  ipsr &= 0x1ffu;
  msg[33] = (char)('0' + (ipsr / 10) % 10);
  msg[34] = (char)('0' + ipsr % 10);
  kiln_m4_write_hex(msg + 42, frame[6] /* stacked PC */);
  kiln_m4_write_hex(msg + 59, *(volatile uint32_t*)0xE000ED28u /* CFSR */);
  kiln_m4_semihost(0x04u /* SYS_WRITE0 */, msg);
  kiln_m4_semihost(0x20u /* SYS_EXIT_EXTENDED */, exit_block);
  for (;;) {
  }
}

/* Exceptions 0-15 of ARMv7-M; no interrupt is ever enabled, so no IRQ entries follow. */
__attribute__((section(".kiln_vectors"), used)) static const uintptr_t kiln_m4_vectors[16] = {
    0x20400000u,                      /* 0: initial SP, top of the 4 MB RAM at 0x20000000 */
    (uintptr_t)kiln_m4_reset_handler, /* 1: reset (Thumb bit comes with the address) */
    (uintptr_t)kiln_m4_fault_handler, /* 2: NMI */
    (uintptr_t)kiln_m4_fault_handler, /* 3: HardFault */
    (uintptr_t)kiln_m4_fault_handler, /* 4: MemManage */
    (uintptr_t)kiln_m4_fault_handler, /* 5: BusFault */
    (uintptr_t)kiln_m4_fault_handler, /* 6: UsageFault */
    0,                                /* 7: reserved */
    0,                                /* 8: reserved */
    0,                                /* 9: reserved */
    0,                                /* 10: reserved */
    (uintptr_t)kiln_m4_fault_handler, /* 11: SVCall */
    (uintptr_t)kiln_m4_fault_handler, /* 12: DebugMonitor */
    0,                                /* 13: reserved */
    (uintptr_t)kiln_m4_fault_handler, /* 14: PendSV */
    (uintptr_t)kiln_m4_fault_handler, /* 15: SysTick */
};
