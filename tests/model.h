/*
 * model.h - a deliberately simple reference model of the cache's observable
 * single-threaded semantics, and a driver that runs the same call sequence
 * on a real cache and on the model, comparing every observable after every
 * step (status, lease closure and program identity, program handles, every
 * ccache_stats field but compile_ns, destroy callbacks in order, get_limits)
 * and running ccache__check().
 *
 * Shared by tests/test_model.c (seeded random sequences) and
 * fuzz/fuzz_cache.c (sequences decoded from the fuzzer's bytes): the only
 * difference is where the choices come from (m_src).
 *
 * No cmocka assertions in here: a mismatch is reported through m_result so
 * the fuzzer can abort() and the test can shrink and print a reproduction.
 */
#ifndef CCACHE_TEST_MODEL_H
#define CCACHE_TEST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ccache.h"

/* Where the random choices come from: a seeded PRNG, or a byte string
 * (choices past its end are 0, and m_src_done() becomes true). */
typedef struct m_src {
  uint64_t rng;
  const uint8_t *bytes;
  size_t len, pos;
} m_src;

void m_src_seed(m_src *s, uint64_t seed);
void m_src_bytes(m_src *s, const uint8_t *bytes, size_t len);
int m_src_done(const m_src *s);
/* A choice in [0, bound); bound >= 1. */
uint32_t m_pick(m_src *s, uint32_t bound);

typedef struct m_opts {
  size_t max_steps;     /* top-level steps (the teardown comes after) */
  unsigned check_every; /* ccache__check every k steps (0: never; 1: every) */
  int trace;            /* print every call (nested ones indented) to stderr */
} m_opts;

typedef struct m_result {
  size_t steps;       /* top-level steps run */
  size_t calls;       /* cache calls made (nested ones included) */
  size_t fail_step;   /* 0: passed; else the step that failed (steps+1: teardown) */
  char msg[512];      /* what went wrong */
  ccache_stats stats; /* the model's statistics before the teardown */
  size_t borrowed;    /* puts and compiles that reused the entry's closure pointer */
  size_t deadlocks;   /* get-or-compile calls answered with CCACHE_EDEADLK */
} m_result;

/* Runs one sequence drawn from src: opens a cache with a configuration drawn
 * from src, runs up to o->max_steps steps (fewer if a byte source runs out),
 * releases every lease and handle, closes the cache and checks that every
 * closure and native program made was destroyed exactly once.
 * Returns 0 on success, -1 on the first mismatch (see r->msg). */
int m_run(m_src *src, const m_opts *o, m_result *r);

#endif
