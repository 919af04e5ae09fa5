/*
 * bench_tables.h - the tables the hit benchmarks (bench_hit, bench_scaling)
 * share: a cache and a bare uthash table holding the same entries.  Apart
 * from bench_util.h because it brings uthash in with its default allocator,
 * which bench_memory replaces with a counting one.
 */
#ifndef BENCH_TABLES_H
#define BENCH_TABLES_H

#include <pthread.h>
#include <semaphore.h>
#include <uthash.h>

#include "bench_util.h"

/* ------------------------------------------------------------ hit tables */

/* The closure pointers stored by the hit benchmarks are fake (never
 * dereferenced, no destroy callback): i-th closure = 0x10000 + 16 i, all
 * below 2^60, so (value >> 60) is a zero the compiler cannot see. */
static inline void *bench_closure_of(uint64_t i) { return (void *)(uintptr_t)(0x10000u + 16u * i); }

/* A bare uthash entry, laid out as the library's (handle, key, value). */
typedef struct bench_uh_entry {
  UT_hash_handle hh;
  ccache_key key;
  void *value;
} bench_uh_entry;

/* n entries keyed bench_key(salt, i) -> bench_closure_of(i).  fold: hashed
 * with the library's fold (find with HASH_FIND_BYHASHVALUE and
 * bench_fold_hash); otherwise uthash's default hash (plain HASH_FIND). */
bench_uh_entry *bench_uh_build(uint64_t salt, uint64_t n, bool fold);
void bench_uh_free(bench_uh_entry **head);
/* A cache (no sweeper) holding the same n entries, over nprograms shared
 * programs (i-th entry runs program i % nprograms). */
ccache *bench_cc_build(uint64_t salt, uint64_t n, unsigned nprograms);
uint64_t bench_cc_hits(ccache *c);

/* ------------------------------------------------- EMLX's mechanism in C */

/* EMLX's cache as bench_hit and bench_scaling model it: one owner thread
 * holds the table (a bare uthash table, default hash) and serves a mailbox
 * (mutex + condition variable), one request at a time; a client waits for
 * its reply on its own semaphore.  Every lookup is a round trip. */
typedef struct bench_emlx_req {
  ccache_key key;
  void *result;
  sem_t done;
  struct bench_emlx_req *next;
} bench_emlx_req;

typedef struct bench_emlx {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bench_emlx_req *head, *tail;
  int stop;
  bench_uh_entry *table; /* touched only by the server thread */
  pthread_t th;
  uint64_t served;
} bench_emlx;

/* Starts the server thread over table (built with fold = false), which it
 * owns from then on; bench_emlx_stop joins it and frees the table. */
void bench_emlx_start(bench_emlx *s, bench_uh_entry *table);
void bench_emlx_stop(bench_emlx *s);
/* A client's request slot: one per client thread. */
void bench_emlx_req_init(bench_emlx_req *r);
void bench_emlx_req_destroy(bench_emlx_req *r);
/* One lookup through the server: the value found, NULL if none. */
void *bench_emlx_call(bench_emlx *s, bench_emlx_req *r, ccache_key key);

#endif
