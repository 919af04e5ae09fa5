/*
 * fuzz_cache.c - libFuzzer target: the input bytes are the choices of the
 * model-based test (tests/model*.c): which call, which key, which program,
 * what the compile callbacks do, clock steps, bounds.  Every observable is
 * compared with the reference model after every step and ccache__check()
 * runs after every step; a mismatch aborts with the model's message.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  m_src src;
  m_src_bytes(&src, data, size);
  m_opts o = {.max_steps = 4096, .check_every = 1, .trace = getenv("FUZZ_TRACE") != NULL};
  m_result r;
  if (m_run(&src, &o, &r) != 0) {
    fprintf(stderr, "fuzz_cache: model mismatch: %s\n(replay with FUZZ_TRACE=1 for the calls)\n",
            r.msg);
    abort();
  }
  return 0;
}
