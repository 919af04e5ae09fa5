/*
 * test_tier_bounds.c - what a tier hands back is untrusted (issue 21, items
 * 4 and 5): the entry size bound, checked before an entry of that size is
 * allocated (directory tier from the file's size, Redis inside the server,
 * a custom tier in the stack), at its edge both ways, and the option's
 * range.  The directory walk and the codec's decode failures are
 * test_tier_bounds_walk.c.
 *
 * The 256 MiB cases run the lookup in a fork child under an RLIMIT_AS with
 * 128 MiB of room, so a reader that allocated the entry would fail there
 * (and show it in its counts); the file is sparse and the Redis value made
 * by SETRANGE, so nothing of that size is ever written by the test.  Under
 * a sanitizer (whose shadow memory needs a huge address space) the child
 * runs without the limit and the counts alone tell.
 */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/tier.h"

#if CCACHE_TEST_REDIS
#include <hiredis/hiredis.h>

#include "redis_support.h"
#endif

/* Built against a tree without the bound (to show these tests fail there),
 * the counter reads 0. */
#ifdef CCACHE_TIER_MAX_ENTRY_DEFAULT
#define OVERSIZE(s) ((s).tier_oversize)
#else
#define OVERSIZE(s) 0ull
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define PAYLOAD 64
#define BIG     ((off_t)256 << 20) /* the planted entry: 256 MiB */

/* ------------------------------------------------------- child under a limit */

/* What the child reports of its one lookup. */
typedef struct child_report {
  int ok;             /* the fetch returned CCACHE_OK */
  int compiles;       /* compile callbacks that ran */
  int limited;        /* RLIMIT_AS was set */
  uint64_t limit_mib; /* to this many MiB of address space in all */
  uint64_t tier_hits, tier_errors, tier_corrupt, tier_oversize, decodes;
} child_report;

/* The address space in use now (VmSize), bytes; 0 if unknown. */
static uint64_t vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
  fclose(f);
  return (uint64_t)kb * 1024u;
}

/* Leave 128 MiB of address space above what the child uses: a 256 MiB
 * buffer cannot be had. */
static int limit_address_space(uint64_t *limit) {
  if (SANITIZED) return 0;
  uint64_t now = vm_size();
  if (!now) return 0;
  *limit = now + ((uint64_t)128 << 20);
  struct rlimit rl = {(rlim_t)*limit, (rlim_t)*limit};
  return setrlimit(RLIMIT_AS, &rl) == 0;
}

typedef ccache_tier *(*tier_maker)(void *arg);

/* In a fork child: limit the address space, open a cache over the tier
 * make(arg) returns, look key up once, report. */
static child_report lookup_in_child(tier_maker make, void *arg, ccache_key key) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    child_report r;
    memset(&r, 0, sizeof r);
    uint64_t limit = 0;
    r.limited = limit_address_space(&limit);
    r.limit_mib = limit >> 20;
    t_ctx ctx = {0};
    t_codec tc = {0};
    ccache_tier *t = make(arg);
    ccache *c = t ? t_cache_over(&ctx, &tc, PAYLOAD, t, T_DISK_TAG) : NULL;
    if (c) {
      t_compiler comp = {0};
      ccache_program *p = NULL;
      r.ok = ccache_program_get_or_compile(c, key, t_compile, &comp, &p) == CCACHE_OK;
      if (r.ok) ccache_program_release(c, p);
      r.compiles = atomic_load(&comp.calls);
      ccache_stats s;
      ccache_stats_init(&s);
      ccache_stats_get(c, &s);
      r.tier_hits = s.tier_hits;
      r.tier_errors = s.tier_errors;
      r.tier_corrupt = s.tier_corrupt;
      r.tier_oversize = OVERSIZE(s);
      r.decodes = (uint64_t)atomic_load(&tc.decodes);
      ccache_close(c);
    }
    ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 3);
  }
  close(fds[1]);
  child_report r;
  memset(&r, 0xff, sizeof r);
  ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof r)
    fail_msg("the child died (status 0x%x, %zd bytes reported)", status, got);
  print_message(
      "child (RLIMIT_AS %s, %llu MiB): fetch %s, compiles %d, tier_hits %llu, tier_errors %llu, "
      "tier_corrupt %llu, tier_oversize %llu, decodes %llu\n",
      r.limited ? "set" : "not set", (unsigned long long)r.limit_mib, r.ok ? "ok" : "FAILED",
      r.compiles, (unsigned long long)r.tier_hits, (unsigned long long)r.tier_errors,
      (unsigned long long)r.tier_corrupt, (unsigned long long)r.tier_oversize,
      (unsigned long long)r.decodes);
  return r;
}

/* The refused 256 MiB entry, as every tier must show it: a miss, counted
 * oversize at each of the two lookups (before the compile lock and after
 * taking it), never decoded, the program compiled. */
static void assert_refused_big(const child_report *r) {
  assert_true(r->ok);
  assert_int_equal(r->compiles, 1);
  assert_int_equal(r->tier_hits, 0);
  assert_int_equal(r->tier_oversize, 2);
  assert_int_equal(r->tier_errors, 0);
  assert_int_equal(r->tier_corrupt, 0);
  assert_int_equal(r->decodes, 0);
}

/* ------------------------------------------------------------- directory */

static ccache_tier *make_disk(void *arg) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = arg;
  ccache_tier *t = NULL;
  return ccache_tier_disk(&o, &t) == CCACHE_OK ? t : NULL;
}

/* Plant a sparse 256 MiB file where key's entry goes (its first bytes an
 * entry header for key, the rest holes). */
static void plant_big_file(const char *dir, ccache_key key) {
  char path[1024], sub[1024];
  t_subdir_path(dir, T_DISK_TAG, key, sub, sizeof sub);
  /* The levels as the tier makes them (0700). */
  char ns[1024];
  t_ns_path(dir, T_DISK_TAG, ns, sizeof ns);
  char fmt[1024];
  snprintf(fmt, sizeof fmt, "%s/v1", dir);
  mkdir(fmt, 0700);
  mkdir(ns, 0700);
  mkdir(sub, 0700);
  t_entry_path(dir, T_DISK_TAG, key, path, sizeof path);
  size_t len = 0;
  unsigned char *e = t_entry(key, T_DISK_TAG, 1, PAYLOAD, &len);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, e, CCACHE__TIER_HDR), (ssize_t)CCACHE__TIER_HDR);
  assert_int_equal(ftruncate(fd, BIG), 0);
  close(fd);
  free(e);
}

/* A 256 MiB file planted as an entry is refused from its size: the reader,
 * limited to 128 MiB more address space, never allocates it.  Not removed
 * as bad bytes; the reader's own compile then replaces it with its entry. */
static void disk_big_planted_entry_refused_under_rlimit(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-disk-big");
  ccache_key key = PK(7);
  plant_big_file(dir, key);
  child_report r = lookup_in_child(make_disk, dir, key);
  assert_refused_big(&r);
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, key, path, sizeof path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, ccache__tier_entry_len(PAYLOAD)); /* the child's own now */
  t_rmrf(dir);
  free(dir);
}

/* Open a cache over a disk tier of dir with the given entry bound. */
static ccache *bounded_cache(t_ctx *ctx, t_codec *tc, const char *dir, uint64_t max_entry) {
  ccache_codec k = t_codec_make(tc, PAYLOAD);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = T_DISK_TAG;
  cfg.tier_min_compile_us = 0;
  ccache_tier *t = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  cfg.tiers = &t;
  cfg.n_tiers = 1;
#ifdef CCACHE_TRUST_UNSIGNED
  cfg.trust_flags = CCACHE_TRUST_UNSIGNED; /* the Redis case: unsigned by name */
#endif
#ifdef CCACHE_TIER_MAX_ENTRY_DEFAULT
  cfg.tier_max_entry_bytes = max_entry;
#else
  (void)max_entry;
#endif
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* The bound at its edge, both ways: an entry of exactly the bound loads;
 * one byte less of bound and it is a miss that is neither written nor
 * read (the writer does not store what no reader with its bound would
 * take). */
static void disk_bound_edge_exact(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-edge");
  size_t elen = ccache__tier_entry_len(PAYLOAD);
  t_ctx ctx = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = bounded_cache(&ctx, &tc, dir, elen - 1);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_writes, 0);
  assert_int_equal(OVERSIZE(s), 1); /* the store refused */
  t_close(c);
  /* A cache with a larger bound writes it ... */
  c = bounded_cache(&ctx, &tc, dir, elen);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(atomic_load(&comp.calls), 2);
  s = t_stats(c);
  assert_int_equal(s.tier_writes, 1);
  t_close(c);
  /* ... which a cache at exactly its size loads, and one below refuses. */
  c = bounded_cache(&ctx, &tc, dir, elen);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(atomic_load(&comp.calls), 2);
  assert_int_equal(t_stats(c).tier_hits, 1);
  t_close(c);
  c = bounded_cache(&ctx, &tc, dir, elen - 1);
  int decodes = atomic_load(&tc.decodes);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(atomic_load(&comp.calls), 3);
  s = t_stats(c);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(OVERSIZE(s), 3); /* the two lookups (before and after the lock), the store */
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_corrupt, 0);
  assert_int_equal(atomic_load(&tc.decodes), decodes);
  t_close(c);
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, PK(1), path, sizeof path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0); /* not removed */
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------------ a custom tier */

/* A backend that hands back a blob longer than the bound: the stack
 * measures it before verifying or decoding it. */
typedef struct long_backend {
  size_t len;
  int gets, frees;
} long_backend;

static int lb_get(void *state, ccache_key pkey, void **blob, size_t *len) {
  long_backend *b = state;
  (void)pkey;
  b->gets++;
  *blob = calloc(1, b->len);
  *len = b->len;
  return *blob ? CCACHE_OK : CCACHE_ENOMEM;
}
static void lb_free(void *state, void *blob, size_t len) {
  long_backend *b = state;
  (void)len;
  b->frees++;
  free(blob);
}
static int lb_put(void *state, ccache_key pkey, const void *blob, size_t len) {
  (void)state, (void)pkey, (void)blob, (void)len;
  return CCACHE_OK;
}

static void custom_tier_long_blob_refused_before_verify(void **state) {
  (void)state;
  long_backend b = {4096, 0, 0};
  ccache_tier_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.size = sizeof ops;
  ops.flags = CCACHE_TIER_PRIVATE;
  ops.get = lb_get;
  ops.free_blob = lb_free;
  ops.put = lb_put;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(&ops, &b, &t), CCACHE_OK);
  t_ctx ctx = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_codec k = t_codec_make(&tc, 8);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.codec = &k;
  cfg.runtime_tag = T_DISK_TAG;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
#ifdef CCACHE_TIER_MAX_ENTRY_DEFAULT
  cfg.tier_max_entry_bytes = 4095;
#endif
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  ccache_stats s = t_stats(c);
  assert_int_equal(b.gets, 1); /* no lock op: one lookup */
  assert_int_equal(b.frees, 1);
  assert_int_equal(OVERSIZE(s), 1);
  assert_int_equal(s.tier_corrupt, 0); /* never verified (a zero blob would be corrupt) */
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(atomic_load(&tc.decodes), 0);
  t_close(c);
}

/* The option's range: 0 is refused at open; the default is 64 MiB. */
static void max_entry_option_checked(void **state) {
  (void)state;
#ifdef CCACHE_TIER_MAX_ENTRY_DEFAULT
  ccache_config cfg;
  ccache_config_init(&cfg);
  assert_int_equal(cfg.tier_max_entry_bytes, (uint64_t)64 << 20);
  cfg.tier_max_entry_bytes = 0;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_non_null(strstr(ccache_error_detail(), "tier_max_entry_bytes"));
  cfg.tier_max_entry_bytes = CCACHE_UNBOUNDED;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  t_close(c);
#else
  fail_msg("no tier_max_entry_bytes in this tree");
#endif
}

/* ------------------------------------------------------------------ Redis */
#if CCACHE_TEST_REDIS
static t_redis_server srv;

static int redis_teardown(void **state) {
  (void)state;
  t_redis_stop(&srv);
  return 0;
}

static ccache_tier *make_redis(void *arg) {
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = arg;
  ccache_tier *t = NULL;
  return ccache_tier_redis(&o, &t) == CCACHE_OK ? t : NULL;
}

/* The Redis key of pkey's entry for T_DISK_TAG under the default prefix. */
static void redis_entry_key(char *out, size_t n, ccache_key pkey) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  for (char *p = ns; *p; p++)
    if (*p == '/') *p = ':';
  snprintf(out, n, "ccache:%s:%016llx%016llx", ns, (unsigned long long)pkey.hi,
           (unsigned long long)pkey.lo);
}

/* A 256 MiB value planted under a key's entry: the lookup's script answers
 * its length, so the reader (128 MiB of address space to spare) receives
 * a number, never the value; its own compile then replaces the value. */
static void redis_big_planted_entry_refused_under_rlimit(void **state) {
  (void)state;
  const char *why = NULL;
  if (!t_redis_binary(&why)) {
    if (t_redis_required()) fail_msg("redis-server required: %s", why);
    print_message("SKIPPED: %s\n", why);
    skip();
  }
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  char key[256];
  redis_entry_key(key, sizeof key, PK(7));
  /* Grown 16 MiB per command: one 256 MiB SETRANGE faults in every page in
   * one command, which outlasts the admin connection's 5 s timeout on a
   * loaded VM. */
  long long len = 0;
  for (long long end = 16 << 20; end <= (long long)BIG; end += 16 << 20)
    len = t_redis_int(&srv, "SETRANGE %s %lld x", key, end - 1);
  assert_int_equal(len, (long long)BIG);
  t_redis_forget_admin(&srv); /* (the child must not share it) */
  child_report r = lookup_in_child(make_redis, srv.addr, PK(7));
  assert_refused_big(&r);
  assert_int_equal(t_redis_int(&srv, "STRLEN %s", key), (long long)ccache__tier_entry_len(PAYLOAD));
  t_redis_stop(&srv);
}

/* A normal entry still loads through the script, and a bound below its
 * size refuses it (the edge, over Redis). */
static void redis_bound_edge_exact(void **state) {
  (void)state;
  const char *why = NULL;
  if (!t_redis_binary(&why)) {
    if (t_redis_required()) fail_msg("redis-server required: %s", why);
    print_message("SKIPPED: %s\n", why);
    skip();
  }
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  size_t elen = 0;
  unsigned char *e = t_entry(PK(3), T_DISK_TAG, 3, PAYLOAD, &elen);
  char key[256];
  redis_entry_key(key, sizeof key, PK(3));
  redisReply *rep = t_redis_cmd(&srv, "SET %s %b", key, e, elen);
  assert_true(rep && rep->type == REDIS_REPLY_STATUS);
  freeReplyObject(rep);
  free(e);
  for (int below = 0; below < 2; below++) {
    t_ctx ctx = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    ccache_codec k = t_codec_make(&tc, PAYLOAD);
    ccache_config cfg;
    t_config(&cfg, &ctx);
    cfg.codec = &k;
    cfg.runtime_tag = T_DISK_TAG;
    cfg.tier_min_compile_us = 1000000000; /* nothing stored */
    ccache_tier *t = make_redis(srv.addr);
    assert_non_null(t);
    cfg.tiers = &t;
    cfg.n_tiers = 1;
#ifdef CCACHE_TRUST_UNSIGNED
    cfg.trust_flags = CCACHE_TRUST_UNSIGNED; /* unsigned by name */
#endif
#ifdef CCACHE_TIER_MAX_ENTRY_DEFAULT
    cfg.tier_max_entry_bytes = elen - (size_t)below;
#endif
    ccache *c = NULL;
    assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
    assert_int_equal(t_goc(c, PK(3), &comp, CCACHE_OK), 3);
    ccache_stats s = t_stats(c);
    assert_int_equal(atomic_load(&comp.calls), below ? 1 : 0);
    assert_int_equal(s.tier_hits, below ? 0 : 1);
    /* below: the lookup, and the one after taking the lease */
    assert_int_equal(OVERSIZE(s), below ? 2 : 0);
    assert_int_equal(s.tier_errors, 0);
    t_close(c);
  }
  t_redis_stop(&srv);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(max_entry_option_checked),
    cmocka_unit_test(disk_big_planted_entry_refused_under_rlimit),
    cmocka_unit_test(disk_bound_edge_exact),
    cmocka_unit_test(custom_tier_long_blob_refused_before_verify),
#if CCACHE_TEST_REDIS
    cmocka_unit_test_teardown(redis_big_planted_entry_refused_under_rlimit, redis_teardown),
    cmocka_unit_test_teardown(redis_bound_edge_exact, redis_teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
