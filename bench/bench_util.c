/* bench_util.c - see bench_util.h. */
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#include "bench_util.h"
#include "bench_tables.h"

#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ options */

void bench_point(const bench_opts *o, const char *figure, const char *series, const char *x,
                 double y, const char *unit) {
  if (!o->points) return;
  FILE *f = fopen(o->points, "a");
  BENCH_CHECK(f != NULL, "cannot open %s", o->points);
  fprintf(f, "%s\t%s\t%s\t%.6g\t%s\n", figure, series, x, y, unit);
  BENCH_CHECK(fclose(f) == 0, "cannot write %s", o->points);
}

void bench_parse(int argc, char **argv, bench_opts *o, const char *what, bool allow_callgrind) {
  memset(o, 0, sizeof *o);
  o->callgrind = -1;
  o->cg_entries = 100000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o->quick = true;
    } else if (strcmp(argv[i], "--json") == 0) {
      o->json = true;
    } else if (strcmp(argv[i], "--points") == 0 && i + 1 < argc) {
      o->points = argv[++i];
    } else if (allow_callgrind && strcmp(argv[i], "--callgrind") == 0 && i + 1 < argc) {
      char *end;
      o->callgrind = strtol(argv[++i], &end, 10);
      if (*end || o->callgrind < 0) {
        fprintf(stderr, "%s: --callgrind wants a count >= 0\n", argv[0]);
        exit(2);
      }
    } else if (allow_callgrind && strcmp(argv[i], "--callgrind-entries") == 0 && i + 1 < argc) {
      char *end;
      o->cg_entries = strtol(argv[++i], &end, 10);
      if (*end || o->cg_entries < 1) {
        fprintf(stderr, "%s: --callgrind-entries wants a count >= 1\n", argv[0]);
        exit(2);
      }
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: %s [--quick] [--json] [--points FILE]%s\n%s\n"
          "  --quick  short mode (CI): a missed target never fails it\n"
          "  --json   print one JSON object instead of the markdown table\n"
          "  --points FILE  append the figures' data points to FILE (tab-separated)\n",
          argv[0], allow_callgrind ? " [--callgrind N [--callgrind-entries E]]" : "", what);
      if (allow_callgrind)
        printf(
            "  --callgrind N  only run N hit-path lookups through each callgrind loop\n"
            "                 (cg_loop_empty, cg_loop_uthash, cg_loop_uthash_jen, cg_loop_ccache)\n"
            "  --callgrind-entries E  table size for --callgrind (default 100000)\n");
      exit(0);
    } else {
      fprintf(stderr, "%s: unknown option %s (try --help)\n", argv[0], argv[i]);
      exit(2);
    }
  }
}

/* ------------------------------------------------------------- clocks */

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------- statistics */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bench_stat bench_stats(const double *v, int n) {
  bench_stat s = {NAN, NAN, NAN, n};
  if (n <= 0) return s;
  double *tmp = malloc((size_t)n * sizeof *tmp);
  BENCH_CHECK(tmp != NULL, "out of memory");
  memcpy(tmp, v, (size_t)n * sizeof *tmp);
  qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
  s.min = tmp[0];
  s.max = tmp[n - 1];
  s.med = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
  free(tmp);
  return s;
}

uint32_t *bench_random_order(size_t n, uint32_t range, uint64_t seed) {
  uint32_t *o = malloc(n * sizeof *o);
  BENCH_CHECK(o != NULL, "out of memory");
  uint64_t st = seed;
  for (size_t i = 0; i < n; i++) o[i] = (uint32_t)(bench_rand(&st) % range);
  return o;
}

/* ------------------------------------------------------------- threads */

int bench_ncpu(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static cpu_set_t start_mask;
static int have_start_mask;

void bench_unpin(void) {
  if (have_start_mask) pthread_setaffinity_np(pthread_self(), sizeof start_mask, &start_mask);
}

void bench_pin(int cpu) {
  cpu_set_t allowed;
  if (!have_start_mask) {
    if (sched_getaffinity(0, sizeof start_mask, &start_mask) != 0) return;
    have_start_mask = 1;
  }
  allowed = start_mask;
  if (cpu < 0) cpu = 0;
  int count = CPU_COUNT(&allowed);
  if (count <= 0) return;
  int want = cpu % count, seen = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == want) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      return;
    }
  }
}

void bench_trim(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* ------------------------------------------- allocation-counting hook */

/* A 16-byte header keeps the size for free() and keeps the block aligned
 * for any object type (max_align_t is 16 bytes on x86-64). */
#define BENCH_HDR 16u

static long long chunk_of(size_t size) {
  size_t c = (size + 8u + 15u) & ~(size_t)15u;
  return (long long)(c < 32u ? 32u : c);
}

void *bench_count_alloc(void *ctx, size_t size) {
  bench_counter *c = ctx;
  unsigned char *p = malloc(size + BENCH_HDR);
  if (!p) return NULL;
  memcpy(p, &size, sizeof size);
  c->live_bytes += (long long)size;
  c->live_chunk_bytes += chunk_of(size);
  c->live_allocs++;
  c->total_allocs++;
  if (c->live_bytes > c->peak_bytes) c->peak_bytes = c->live_bytes;
  return p + BENCH_HDR;
}

void bench_count_free(void *ctx, void *ptr) {
  bench_counter *c = ctx;
  unsigned char *p = (unsigned char *)ptr - BENCH_HDR;
  size_t size;
  memcpy(&size, p, sizeof size);
  c->live_bytes -= (long long)size;
  c->live_chunk_bytes -= chunk_of(size);
  c->live_allocs--;
  free(p);
}

/* ------------------------------------------------------------- report */

void bench_report_init(bench_report *r, const char *name, const char *title) {
  memset(r, 0, sizeof *r);
  r->name = name;
  r->title = title;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

bench_row *bench_add(bench_report *r, const char *figure, double value, const char *unit,
                     double baseline, const char *baseline_name, bench_stat ratio,
                     const char *ratio_what, bench_target_kind kind, double target) {
  BENCH_CHECK(r->n < BENCH_MAX_ROWS, "too many rows");
  bench_row *row = &r->rows[r->n++];
  memset(row, 0, sizeof *row);
  copy_str(row->figure, sizeof row->figure, figure);
  row->value = value;
  copy_str(row->unit, sizeof row->unit, unit);
  row->baseline = baseline;
  copy_str(row->baseline_name, sizeof row->baseline_name, baseline_name);
  row->ratio = ratio;
  copy_str(row->ratio_what, sizeof row->ratio_what, ratio_what);
  row->kind = kind;
  row->target = target;
  return row;
}

void bench_note(bench_report *r, const char *fmt, ...) {
  if (r->n_notes >= (int)(sizeof r->notes / sizeof r->notes[0])) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->notes[r->n_notes++], sizeof r->notes[0], fmt, ap);
  va_end(ap);
}

const char *bench_status(const bench_row *row) {
  switch (row->kind) {
    case BENCH_RATIO_LE:
      return row->ratio.n > 0 && row->ratio.med <= row->target ? "met" : "MISSED";
    case BENCH_RATIO_GE:
      return row->ratio.n > 0 && row->ratio.med >= row->target ? "met" : "MISSED";
    case BENCH_VALUE_LE:
      return row->value <= row->target ? "met" : "MISSED";
    default:
      return "report";
  }
}

/* Numbers with about four significant digits, the way a reader wants them. */
static void fmt_num(char *buf, size_t cap, double v) {
  double a = fabs(v);
  if (isnan(v))
    snprintf(buf, cap, "–");
  else if (a >= 1e6)
    snprintf(buf, cap, "%.3g", v);
  else if (a >= 100)
    snprintf(buf, cap, "%.0f", v);
  else if (a >= 10)
    snprintf(buf, cap, "%.1f", v);
  else
    snprintf(buf, cap, "%.2f", v);
}

static void fmt_target(char *buf, size_t cap, const bench_row *row) {
  char t[32];
  fmt_num(t, sizeof t, row->target);
  switch (row->kind) {
    case BENCH_RATIO_LE:
      snprintf(buf, cap, "≤ %s×", t);
      break;
    case BENCH_RATIO_GE:
      snprintf(buf, cap, "≥ %s×", t);
      break;
    case BENCH_VALUE_LE:
      snprintf(buf, cap, "≤ %s %s", t, row->unit);
      break;
    default:
      snprintf(buf, cap, "report");
      break;
  }
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static void json_num(double v) {
  if (isnan(v) || isinf(v))
    printf("null");
  else
    printf("%.6g", v);
}

int bench_report_print(const bench_report *r, const bench_opts *o) {
  if (o->json) {
    printf("{\"bench\": ");
    json_str(r->name);
    printf(", \"title\": ");
    json_str(r->title);
    printf(", \"mode\": \"%s\", \"rows\": [", o->quick ? "quick" : "full");
    for (int i = 0; i < r->n; i++) {
      const bench_row *row = &r->rows[i];
      printf("%s\n  {\"figure\": ", i ? "," : "");
      json_str(row->figure);
      printf(", \"value\": ");
      json_num(row->value);
      printf(", \"unit\": ");
      json_str(row->unit);
      printf(", \"baseline\": ");
      json_num(row->baseline);
      printf(", \"baseline_name\": ");
      json_str(row->baseline_name);
      printf(", \"ratio\": ");
      json_num(row->ratio.n ? row->ratio.med : NAN);
      printf(", \"ratio_min\": ");
      json_num(row->ratio.n ? row->ratio.min : NAN);
      printf(", \"ratio_max\": ");
      json_num(row->ratio.n ? row->ratio.max : NAN);
      printf(", \"ratio_reps\": %d, \"ratio_what\": ", row->ratio.n);
      json_str(row->ratio_what);
      static const char *const kinds[] = {"report", "ratio_le", "ratio_ge", "value_le"};
      printf(", \"target_kind\": \"%s\", \"target\": ", kinds[row->kind]);
      json_num(row->kind == BENCH_REPORT ? NAN : row->target);
      printf(", \"status\": \"%s\", \"note\": ", bench_status(row));
      json_str(row->note);
      printf("}");
    }
    printf("\n], \"notes\": [");
    for (int i = 0; i < r->n_notes; i++) {
      printf("%s", i ? ", " : "");
      json_str(r->notes[i]);
    }
    printf("]}\n");
    return 0;
  }
  printf("### %s: %s%s\n\n", r->name, r->title, o->quick ? " (quick mode)" : "");
  printf(
      "| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) | "
      "target | status | notes |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < r->n; i++) {
    const bench_row *row = &r->rows[i];
    char v[32], b[32], med[32], lo[32], hi[32], tgt[48], ratio[160];
    fmt_num(v, sizeof v, row->value);
    fmt_num(b, sizeof b, row->baseline);
    if (row->ratio.n > 0) {
      fmt_num(med, sizeof med, row->ratio.med);
      fmt_num(lo, sizeof lo, row->ratio.min);
      fmt_num(hi, sizeof hi, row->ratio.max);
      snprintf(ratio, sizeof ratio, "%s× [%s, %s] (%d) %s", med, lo, hi, row->ratio.n,
               row->ratio_what);
    } else {
      snprintf(ratio, sizeof ratio, "–");
    }
    fmt_target(tgt, sizeof tgt, row);
    printf("| %s | %s %s | ", row->figure, v, row->unit);
    if (isnan(row->baseline))
      printf("– | ");
    else
      printf("%s %s (%s) | ", b, row->unit, row->baseline_name);
    printf("%s | %s | %s | %s |\n", ratio, tgt, bench_status(row), row->note);
  }
  if (r->n_notes) printf("\n");
  for (int i = 0; i < r->n_notes; i++) printf("- %s\n", r->notes[i]);
  printf("\n");
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------ hit tables */

bench_uh_entry *bench_uh_build(uint64_t salt, uint64_t n, bool fold) {
  bench_uh_entry *head = NULL;
  for (uint64_t i = 0; i < n; i++) {
    bench_uh_entry *e = calloc(1, sizeof *e);
    BENCH_CHECK(e != NULL, "out of memory");
    e->key = bench_key(salt, i);
    e->value = bench_closure_of(i);
    if (fold)
      HASH_ADD_BYHASHVALUE(hh, head, key, sizeof e->key, bench_fold_hash(e->key), e);
    else
      HASH_ADD(hh, head, key, sizeof e->key, e);
  }
  BENCH_CHECK(HASH_COUNT(head) == n, "uthash holds %u of %llu", HASH_COUNT(head),
              (unsigned long long)n);
  return head;
}

void bench_uh_free(bench_uh_entry **head) {
  bench_uh_entry *e, *tmp;
  HASH_ITER(hh, *head, e, tmp) {
    HASH_DELETE(hh, *head, e);
    free(e);
  }
}

ccache *bench_cc_build(uint64_t salt, uint64_t n, unsigned nprograms) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  ccache *c;
  BENCH_OK(ccache_open(&cfg, &c));
  ccache_program **p = calloc(nprograms, sizeof *p);
  BENCH_CHECK(p != NULL, "out of memory");
  for (unsigned j = 0; j < nprograms; j++)
    BENCH_OK(
        ccache_program_intern(c, bench_key(99, j), (void *)(uintptr_t)(0x1000u + j), 4096, &p[j]));
  for (uint64_t i = 0; i < n; i++)
    BENCH_OK(ccache_put(c, bench_key(salt, i), bench_closure_of(i), p[i % nprograms]));
  for (unsigned j = 0; j < nprograms; j++) ccache_program_release(c, p[j]);
  free(p);
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.items == n, "cache holds %llu of %llu", (unsigned long long)st.items,
              (unsigned long long)n);
  return c;
}

uint64_t bench_cc_hits(ccache *c) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  return st.hits;
}

/* ------------------------------------------------- EMLX's mechanism in C */

static void *emlx_main(void *arg) {
  bench_emlx *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    bench_emlx_req *r = s->head;
    if (!r) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    s->head = r->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    bench_uh_entry *e;
    HASH_FIND(hh, s->table, &r->key, sizeof r->key, e);
    r->result = e ? e->value : NULL;
    s->served++;
    sem_post(&r->done);
  }
}

void bench_emlx_start(bench_emlx *s, bench_uh_entry *table) {
  memset(s, 0, sizeof *s);
  s->table = table;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  BENCH_CHECK(pthread_create(&s->th, NULL, emlx_main, s) == 0, "pthread_create");
}

void bench_emlx_stop(bench_emlx *s) {
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  bench_uh_free(&s->table);
}

void bench_emlx_req_init(bench_emlx_req *r) { sem_init(&r->done, 0, 0); }
void bench_emlx_req_destroy(bench_emlx_req *r) { sem_destroy(&r->done); }

void *bench_emlx_call(bench_emlx *s, bench_emlx_req *r, ccache_key key) {
  r->key = key;
  r->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = r;
  else
    s->head = r;
  s->tail = r;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  while (sem_wait(&r->done) != 0) {
  }
  return r->result;
}
