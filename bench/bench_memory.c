/*
 * bench_memory.c - P6: what does an entry cost in memory?
 *
 * Every byte the cache allocates goes through the config's allocator hook
 * (config.alloc / config.free / config.alloc_ctx), which here counts live
 * bytes.  Measured at 1M entries:
 *  - bytes per closure entry: 1M ccache_put()s of distinct keys sharing one
 *    program (entry structs plus the amortised uthash bucket arrays);
 *  - bytes per program: 1M programs interned, a handle held on each;
 *  - both again in a strong-key cache (CCACHE_KEYS_STRONG, issue 22);
 * against the 56-byte uthash handle (UT_hash_handle) that any uthash-based
 * table pays per item, and beside a bare uthash table of (16-byte key,
 * pointer) items counted the same way.  Counts are of requested bytes; the
 * note gives an estimate of glibc malloc's real use (chunk headers and
 * rounding).  After ccache_close() the live count must be back to zero.
 */
#include <string.h>

#include "bench_util.h"

/* The bare uthash table allocates through the same counter. */
static bench_counter uh_counter;
#define uthash_malloc(sz)    bench_count_alloc(&uh_counter, (sz))
#define uthash_free(ptr, sz) bench_count_free(&uh_counter, (ptr))
#include <uthash.h>

typedef struct uh_entry {
  UT_hash_handle hh;
  ccache_key key;
  void *value;
} uh_entry;

static ccache *open_counted(bench_counter *cnt, bool strong) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.key_mode = strong ? CCACHE_KEYS_STRONG : CCACHE_KEYS_FAST;
  cfg.sweeper_thread = 0;
  cfg.alloc = bench_count_alloc;
  cfg.free = bench_count_free;
  cfg.alloc_ctx = cnt;
  ccache *c;
  BENCH_OK(ccache_open(&cfg, &c));
  return c;
}

/* A strong key whose first half is k (the second derived from it). */
static ccache_strong_key strong_of(ccache_key k) {
  ccache_strong_key s = {k, {~k.hi, k.lo ^ 0x5bd1e995u}};
  return s;
}

static int intern_in(ccache *c, bool strong, ccache_key k, void *native, uint64_t cost,
                     ccache_program **out) {
  ccache_strong_key sk = strong_of(k);
  return strong ? ccache_program_intern_strong(c, &sk, native, cost, out)
                : ccache_program_intern(c, k, native, cost, out);
}

static void entries(bench_report *rep, uint64_t n, const char *label, bool strong) {
  bench_counter cnt = {0};
  ccache *c = open_counted(&cnt, strong);
  ccache_program *p;
  BENCH_OK(intern_in(c, strong, bench_key(99, 0), (void *)(uintptr_t)0x1000u, 4096, &p));
  long long b0 = cnt.live_bytes, c0 = cnt.live_chunk_bytes, a0 = cnt.live_allocs;
  for (uint64_t i = 0; i < n; i++) {
    void *closure = (void *)(uintptr_t)(0x10000u + 16u * i);
    ccache_strong_key sk = strong_of(bench_key(31, i));
    BENCH_OK(strong ? ccache_put_strong(c, &sk, closure, p)
                    : ccache_put(c, bench_key(31, i), closure, p));
  }
  double per = (double)(cnt.live_bytes - b0) / (double)n;
  double per_chunk = (double)(cnt.live_chunk_bytes - c0) / (double)n;
  double allocs = (double)(cnt.live_allocs - a0) / (double)n;
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.items == n, "items %llu, want %llu", (unsigned long long)st.items,
              (unsigned long long)n);
  ccache_program_release(c, p);
  BENCH_OK(ccache_close(c));
  BENCH_CHECK(cnt.live_bytes == 0 && cnt.live_allocs == 0,
              "%lld bytes in %lld blocks still live after close", cnt.live_bytes, cnt.live_allocs);

  /* A bare uthash table of the same keys, counted the same way. */
  memset(&uh_counter, 0, sizeof uh_counter);
  uh_entry *head = NULL;
  for (uint64_t i = 0; i < n; i++) {
    uh_entry *e = bench_count_alloc(&uh_counter, sizeof *e);
    BENCH_CHECK(e != NULL, "out of memory");
    memset(e, 0, sizeof *e);
    e->key = bench_key(31, i);
    e->value = e;
    HASH_ADD(hh, head, key, sizeof e->key, e);
  }
  double uh_per = (double)uh_counter.live_bytes / (double)n;
  uh_entry *e, *tmp;
  HASH_ITER(hh, head, e, tmp) {
    HASH_DELETE(hh, head, e);
    bench_count_free(&uh_counter, e);
  }
  BENCH_CHECK(uh_counter.live_bytes == 0, "uthash baseline leaked");

  char fig[96];
  snprintf(fig, sizeof fig, "P6 bytes per closure entry, %s entries%s", label,
           strong ? ", strong keys" : "");
  bench_stat one = {per / (double)sizeof(UT_hash_handle), per / (double)sizeof(UT_hash_handle),
                    per / (double)sizeof(UT_hash_handle), 1};
  bench_row *row =
      bench_add(rep, fig, per, "B", (double)sizeof(UT_hash_handle), "UT_hash_handle floor", one,
                "ccache / handle", strong ? BENCH_REPORT : BENCH_VALUE_LE, 128);
  snprintf(row->note, sizeof row->note,
           "%.2f allocations/entry; ~%.0f B with glibc chunk overhead; bare uthash item "
           "(key + pointer) %.1f B",
           allocs, per_chunk, uh_per);
}

static void programs(bench_report *rep, uint64_t n, const char *label, bool strong) {
  bench_counter cnt = {0};
  ccache *c = open_counted(&cnt, strong);
  ccache_program **h = malloc(n * sizeof *h);
  BENCH_CHECK(h != NULL, "out of memory");
  long long b0 = cnt.live_bytes, c0 = cnt.live_chunk_bytes;
  for (uint64_t i = 0; i < n; i++)
    BENCH_OK(
        intern_in(c, strong, bench_key(32, i), (void *)(uintptr_t)(0x10000u + 16u * i), 1, &h[i]));
  double per = (double)(cnt.live_bytes - b0) / (double)n;
  double per_chunk = (double)(cnt.live_chunk_bytes - c0) / (double)n;
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.programs == n, "programs %llu, want %llu", (unsigned long long)st.programs,
              (unsigned long long)n);
  for (uint64_t i = 0; i < n; i++) ccache_program_release(c, h[i]);
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.programs == 0 && st.programs_destroyed == n, "programs left after release");
  BENCH_OK(ccache_close(c));
  BENCH_CHECK(cnt.live_bytes == 0, "%lld bytes still live after close", cnt.live_bytes);
  free(h);
  char fig[96];
  snprintf(fig, sizeof fig, "P6 bytes per program, %s programs%s", label,
           strong ? ", strong keys" : "");
  bench_stat one = {per / (double)sizeof(UT_hash_handle), per / (double)sizeof(UT_hash_handle),
                    per / (double)sizeof(UT_hash_handle), 1};
  bench_row *row = bench_add(rep, fig, per, "B", (double)sizeof(UT_hash_handle),
                             "UT_hash_handle floor", one, "ccache / handle", BENCH_REPORT, 0);
  snprintf(row->note, sizeof row->note, "~%.0f B with glibc chunk overhead", per_chunk);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "P6: bytes per closure entry and per program, via the allocator hook",
              false);
  bench_report rep;
  bench_report_init(&rep, "bench_memory",
                    "what does an entry cost in memory? (allocator-hook count)");
  uint64_t n = o.quick ? 100000 : 1000000;
  const char *label = o.quick ? "100k" : "1M";
  entries(&rep, n, label, false);
  entries(&rep, n, label, true);
  programs(&rep, n, label, false);
  programs(&rep, n, label, true);
  bench_note(&rep,
             "requested bytes counted by config.alloc/free (live after minus live before); "
             "deterministic, so one measurement (no spread)");
  if (o.quick) bench_note(&rep, "quick mode: 100k entries instead of 1M");
  return bench_report_print(&rep, &o);
}
