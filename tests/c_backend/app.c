/* An outside application of the generated C interface (DESIGN.md section 2.4): it includes two
 * model headers at once (the keyword-spotting CNN as "kws" and the neural field MLP as "field"),
 * checks run()'s argument errors, finds tensors by name through the descriptor, runs both
 * models on a fixed input twice with two workspaces (reentrancy) and prints the outputs, which
 * the test compares with the host executor. Only <stdio.h> beyond the interface. */
#include <stdio.h>
#include <string.h>

#include "field.h"
#include "kws.h"

static uint8_t kws_arena[KILN_KWS_WORKSPACE_SIZE + KILN_KWS_WORKSPACE_ALIGNMENT];
static uint8_t kws_arena2[KILN_KWS_WORKSPACE_SIZE + KILN_KWS_WORKSPACE_ALIGNMENT];
static uint8_t field_arena[KILN_FIELD_WORKSPACE_SIZE + KILN_FIELD_WORKSPACE_ALIGNMENT];
static float kws_in[1 * 1 * 49 * 10], kws_out[12], kws_out2[12];
static float field_in[64 * 3], field_out[64 * 4];

static uint8_t* aligned(uint8_t* p, size_t a) { return p + (a - (uintptr_t)p % a) % a; }

static int failures = 0;
#define CHECK(cond)                                    \
  do {                                                 \
    if (!(cond)) {                                     \
      printf("FAILED line %d: %s\n", __LINE__, #cond); \
      ++failures;                                      \
    }                                                  \
  } while (0)

int main(void) {
  struct kiln_kws_inputs in;
  struct kiln_kws_outputs out;
  struct kiln_kws_workspace ws, ws2;
  struct kiln_field_inputs fin;
  struct kiln_field_outputs fout;
  struct kiln_field_workspace fws;
  int32_t i, xi, pi;
  const kiln_model_descriptor* d = &kiln_kws_descriptor;

  for (i = 0; i < 490; ++i) kws_in[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (i = 0; i < 64 * 3; ++i) field_in[i] = (float)((i * 13) % 97) / 48.0f - 1.0f;

  /* Descriptor and lookup by name. */
  CHECK(strcmp(d->name, "kws") == 0);
  CHECK(d->num_inputs == 1 && d->num_outputs == 1);
  CHECK(d->inputs[0].dtype == 1 && d->inputs[0].size_bytes == sizeof(kws_in));
  CHECK(d->workspace_size == KILN_KWS_WORKSPACE_SIZE);
  xi = kiln_kws_get_input_index(d->inputs[0].name);
  pi = kiln_kws_get_output_index(d->outputs[0].name);
  CHECK(xi == 0 && pi == 0);
  CHECK(kiln_kws_get_input_index("no such tensor") == -1);
  CHECK(kiln_kws_get_input_index(NULL) == -1);
  CHECK(kiln_kws_set_input(&in, 1, kws_in) == KILN_ERROR_INVALID_INDEX);
  CHECK(kiln_kws_set_input(NULL, 0, kws_in) == KILN_ERROR_NULL_ARGUMENT);
  CHECK(kiln_kws_set_input(&in, xi, kws_in) == KILN_OK);
  CHECK(kiln_kws_set_output(&out, pi, kws_out) == KILN_OK);

  /* Argument errors: every one a distinct code, never a crash. */
  ws.arena = NULL;
  CHECK(kiln_kws_run(&in, &out, &ws) == KILN_ERROR_NULL_WORKSPACE);
  ws.arena = aligned(kws_arena, KILN_KWS_WORKSPACE_ALIGNMENT) + 1;
  CHECK(kiln_kws_run(&in, &out, &ws) == KILN_ERROR_MISALIGNED_WORKSPACE);
  CHECK(kiln_kws_run(NULL, &out, &ws) == KILN_ERROR_NULL_ARGUMENT);
  CHECK(kiln_kws_run(&in, &out, NULL) == KILN_ERROR_NULL_ARGUMENT);
  ws.arena = aligned(kws_arena, KILN_KWS_WORKSPACE_ALIGNMENT);
  CHECK(kiln_kws_set_output(&out, 0, NULL) == KILN_OK);
  CHECK(kiln_kws_run(&in, &out, &ws) == KILN_ERROR_NULL_TENSOR);
  CHECK(kiln_kws_set_output(&out, 0, kws_out) == KILN_OK);
  CHECK(KILN_ERROR_NULL_ARGUMENT != KILN_ERROR_NULL_TENSOR &&
        KILN_ERROR_NULL_WORKSPACE != KILN_ERROR_MISALIGNED_WORKSPACE);

  /* Two workspaces give the same answer (no hidden state). */
  CHECK(kiln_kws_run(&in, &out, &ws) == KILN_OK);
  ws2.arena = aligned(kws_arena2, KILN_KWS_WORKSPACE_ALIGNMENT);
  out.probs = kws_out2;
  memset(ws.arena, 0xA5, KILN_KWS_WORKSPACE_SIZE); /* garbage left in the first workspace */
  CHECK(kiln_kws_run(&in, &out, &ws2) == KILN_OK);
  CHECK(memcmp(kws_out, kws_out2, sizeof(kws_out)) == 0);

  /* The second model, through its struct members directly. */
  fin.xyz = field_in;
  fout.rgba = field_out;
  fws.arena = aligned(field_arena, KILN_FIELD_WORKSPACE_ALIGNMENT);
  CHECK(kiln_field_descriptor.outputs[0].size_bytes == sizeof(field_out));
  CHECK(kiln_field_run(&fin, &fout, &fws) == KILN_OK);

  for (i = 0; i < 12; ++i) printf("kws %d %.9g\n", (int)i, (double)kws_out[i]);
  for (i = 0; i < 64 * 4; ++i) printf("field %d %.9g\n", (int)i, (double)field_out[i]);
  printf("%d failures\n", (int)failures);
  return failures != 0;
}
