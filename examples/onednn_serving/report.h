/* report.h: the comparison table (text or JSON). */
#ifndef ONEDNN_SERVING_REPORT_H
#define ONEDNN_SERVING_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "prims.h"

/** The run's settings, echoed in the report. */
typedef struct run_info {
  int layers, requests, decode, threads, omp_threads, runtime_dims;
  int strong_keys; /**< ccache's keys: BLAKE2b-256 (--strong-keys) or XXH3-128 */
  uint64_t seed, max_items, ttl_ms, max_cost;
  int checksums_agree; /**< every request's final logits equal in all modes */
} run_info;

/** What one mode measured. */
typedef struct mode_result {
  acquire_mode mode;
  const char *name;
  uint64_t requests, tokens, generated, prim_requests;
  uint64_t compiles;          /**< primitives created */
  uint64_t hits;              /**< requests served without creating one */
  uint64_t misses;            /**< ccache / per-thread lookups that found nothing */
  int estimated;              /**< compiles/hits inferred (oneDNN's cache has no counters) */
  uint64_t distinct_programs; /**< distinct program keys requested */
  int have_cache_stats;       /**< the rows below are ccache's */
  uint64_t closure_compiles, program_hits, programs_end, programs_peak, items_end;
  /* From ccache's event hook: program compiles it reported, and per program
   * key how many times it was compiled (evicted, then needed again). */
  uint64_t event_compiles, programs_recompiled, most_compiles_of_one;
  uint64_t ev_capacity, ev_ttl, ev_cost;
  uint64_t fetch_hits; /**< requests served by ccache_fetch alone */
  int have_key_ms;     /**< key_ms is set: ccache with --strong-keys */
  double key_ms;       /**< building the strong keys of the fetch_hits requests */
  uint64_t waits; /**< single-flight joins, both levels: a thread waited for another's compile */
  uint64_t closure_waits; /**< the closure-level ones (ccache_stats::waits) */
  int have_tl_stats;      /**< the per-thread table rows below are set */
  uint64_t tl_hits, tl_misses, tl_clears, tl_entries_cleared;
  uint64_t scratch_bytes_max; /**< largest worker scratchpad */
  /** Summed over serving threads: getting primitives (acquire), of which on
   *  miss paths (compile), so lookup = acquire - compile (keys, lookups,
   *  releases; mode 1 has none); executing (binding memory, running). */
  double acquire_ms, compile_ms, lookup_ms, exec_ms, wall_ms;
  /** The requests whose getting is counted in lookup_ms (hits; for ccache
   *  its fetch hits): the denominator of the per-lookup figures. */
  uint64_t lookups;
  int have_lookup;       /**< mode 1 creates on every request: no lookup */
  double p50_ms, p99_ms; /**< per-token latency */
  uint64_t *checksums;   /**< final-logits checksum per request */
} mode_result;

/** Print the table for @p n modes (in mode order). */
void report_table(FILE *f, const run_info *ri, const mode_result *r, int n);
/** The same as one JSON object. */
void report_json(FILE *f, const run_info *ri, const mode_result *r, int n);

#endif
