/* kiln_driver.c: an application that runs a model kiln generated, on files.
 *   PROGRAM IN_0 ... IN_{n-1} OUT_0 ... OUT_{m-1}
 * Each file holds a tensor's raw bytes (little-endian, row-major); the model's descriptor gives
 * the sizes. Compile with -DKILN_MODEL=NAME -DKILN_MODEL_HEADER='"NAME.h"'. It uses only the
 * interface of NAME.h (DESIGN.md section 2.4), as any outside application would.
 * Exit status: 0 success, 2 a usage or file error, 10 + the error code run() returned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include KILN_MODEL_HEADER

#define KILN_CAT_(a, b, c) a##b##c
#define KILN_CAT(a, b, c) KILN_CAT_(a, b, c)
#define KILN_API(suffix) KILN_CAT(kiln_, KILN_MODEL, suffix)

static void* aligned_block(size_t size, size_t alignment, void** base) {
  uintptr_t p;
  *base = malloc(size + alignment);
  if (*base == NULL) return NULL;
  p = ((uintptr_t)*base + alignment - 1) / alignment * alignment;
  return (void*)p;
}

int main(int argc, char** argv) {
  const kiln_model_descriptor* d = &KILN_API(_descriptor);
  struct KILN_API(_inputs) inputs;
  struct KILN_API(_outputs) outputs;
  struct KILN_API(_workspace) workspace;
  void *bases[64], *ptrs[64], *ws_base;
  int32_t i, rc;
  if (argc != 1 + d->num_inputs + d->num_outputs || d->num_inputs + d->num_outputs > 62) {
    fprintf(stderr, "usage: %s <%d input files> <%d output files>\n", argv[0], (int)d->num_inputs,
            (int)d->num_outputs);
    return 2;
  }
  memset(&inputs, 0, sizeof(inputs));
  memset(&outputs, 0, sizeof(outputs));
  for (i = 0; i < d->num_inputs; ++i) {
    const kiln_tensor_info* t = &d->inputs[i];
    void* data = aligned_block(t->size_bytes + 1, 16, &bases[i]);
    ptrs[i] = data;
    FILE* f = fopen(argv[1 + i], "rb");
    if (data == NULL || f == NULL || fread(data, 1, t->size_bytes, f) != t->size_bytes) {
      fprintf(stderr, "cannot read %lu bytes for input '%s' from %s\n",
              (unsigned long)t->size_bytes, t->name, argv[1 + i]);
      return 2;
    }
    fclose(f);
    if (KILN_API(_get_input_index)(t->name) != i ||
        KILN_API(_set_input)(&inputs, i, data) != KILN_OK) {
      fprintf(stderr, "input '%s': lookup by name failed\n", t->name);
      return 2;
    }
  }
  for (i = 0; i < d->num_outputs; ++i) {
    const kiln_tensor_info* t = &d->outputs[i];
    void* data = aligned_block(t->size_bytes + 1, 16, &bases[d->num_inputs + i]);
    if (data == NULL) return 2;
    ptrs[d->num_inputs + i] = data;
    if (KILN_API(_set_output)(&outputs, i, data) != KILN_OK) return 2;
  }
  workspace.arena = (uint8_t*)aligned_block(d->workspace_size, d->workspace_alignment, &ws_base);
  if (workspace.arena == NULL) return 2;
  rc = KILN_API(_run)(&inputs, &outputs, &workspace);
  if (rc != KILN_OK) {
    fprintf(stderr, "run failed with error %d\n", (int)rc);
    return 10 + (int)rc;
  }
  for (i = 0; i < d->num_outputs; ++i) {
    const kiln_tensor_info* t = &d->outputs[i];
    FILE* f = fopen(argv[1 + d->num_inputs + i], "wb");
    const void* data = ptrs[d->num_inputs + i];
    if (f == NULL || fwrite(data, 1, t->size_bytes, f) != t->size_bytes) {
      fprintf(stderr, "cannot write output '%s' to %s\n", t->name, argv[1 + d->num_inputs + i]);
      return 2;
    }
    fclose(f);
  }
  for (i = 0; i < d->num_inputs + d->num_outputs; ++i) free(bases[i]);
  free(ws_base);
  return 0;
}
