/*
 * test_tier.c - the tier stack (tier_stack.c) and the entry format, over an
 * in-memory tier whose every op is counted and logged and can be made to
 * fail, be busy, or publish an entry "from another process".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/detail.h"
#include "tier/tier.h"
#include "tier_support.h"

/* ------------------------------------------------------- the memory tier */

/* What a set of memory tiers shares: an op log (single-threaded tests). */
static char op_log[512];
static void log_op(const char *what, int tier) {
  size_t n = strlen(op_log);
  snprintf(op_log + n, sizeof op_log - n, "%s%s%d", n ? " " : "", what, tier);
}

typedef struct mem_entry {
  ccache_key key;
  unsigned char *blob;
  size_t len;
  struct mem_entry *next;
} mem_entry;

typedef struct mem_tier {
  int id;
  pthread_mutex_t mu;
  mem_entry *head;
  char ns[64];
  _Atomic int attaches, gets, get_hits, puts, removes, locks, unlocks, renews, closes, frees;
  /* Faults and behaviour. */
  int attach_rc, get_rc, put_rc, lock_rc, renew_rc;
  int busy;                 /* lock() answers EBUSY */
  int publish_at_get;       /* the n-th get() first stores `pending` (0: never) */
  int publish_at_remove_if; /* remove_if() first stores `pending` */
  _Atomic int remove_ifs;
  unsigned char *pending;
  size_t pending_len;
  ccache_key pending_key;
  /* Renewals. */
  pthread_mutex_t rmu;
  pthread_cond_t rcv;
  pthread_t renewer;
  int renewers_seen; /* distinct renewing threads, as seen in order */
} mem_tier;

static mem_entry *mem_find(mem_tier *m, ccache_key k) {
  for (mem_entry *e = m->head; e; e = e->next)
    if (e->key.lo == k.lo && e->key.hi == k.hi) return e;
  return NULL;
}

static void mem_store(mem_tier *m, ccache_key k, const void *blob, size_t len) {
  pthread_mutex_lock(&m->mu);
  mem_entry *e = mem_find(m, k);
  if (!e) {
    e = calloc(1, sizeof *e);
    assert_non_null(e);
    e->key = k;
    e->next = m->head;
    m->head = e;
  }
  free(e->blob);
  e->blob = malloc(len ? len : 1);
  memcpy(e->blob, blob, len);
  e->len = len;
  pthread_mutex_unlock(&m->mu);
}

static int m_attach(void *s, const char *ns) {
  mem_tier *m = s;
  atomic_fetch_add(&m->attaches, 1);
  snprintf(m->ns, sizeof m->ns, "%s", ns);
  return m->attach_rc;
}

static int m_get(void *s, ccache_key k, void **blob, size_t *len) {
  mem_tier *m = s;
  int n = atomic_fetch_add(&m->gets, 1) + 1;
  log_op("g", m->id);
  if (m->publish_at_get && n == m->publish_at_get)
    mem_store(m, m->pending_key, m->pending, m->pending_len);
  if (m->get_rc) return m->get_rc;
  pthread_mutex_lock(&m->mu);
  mem_entry *e = mem_find(m, k);
  int rc = CCACHE_MISS;
  if (e) {
    *blob = malloc(e->len ? e->len : 1);
    memcpy(*blob, e->blob, e->len);
    *len = e->len;
    rc = CCACHE_OK;
    atomic_fetch_add(&m->get_hits, 1);
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

static void m_free_blob(void *s, void *blob, size_t len) {
  mem_tier *m = s;
  (void)len;
  atomic_fetch_add(&m->frees, 1);
  free(blob);
}

static int m_put(void *s, ccache_key k, const void *blob, size_t len) {
  mem_tier *m = s;
  atomic_fetch_add(&m->puts, 1);
  log_op("P", m->id);
  if (m->put_rc) return m->put_rc;
  mem_store(m, k, blob, len);
  return CCACHE_OK;
}

static int m_remove(void *s, ccache_key k) {
  mem_tier *m = s;
  atomic_fetch_add(&m->removes, 1);
  log_op("R", m->id);
  pthread_mutex_lock(&m->mu);
  int rc = CCACHE_MISS;
  for (mem_entry **pp = &m->head; *pp; pp = &(*pp)->next) {
    mem_entry *e = *pp;
    if (e->key.lo == k.lo && e->key.hi == k.hi) {
      *pp = e->next;
      free(e->blob);
      free(e);
      rc = CCACHE_OK;
      break;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

/* Removes k's entry only if it holds exactly blob. */
static int m_remove_if(void *s, ccache_key k, const void *blob, size_t len) {
  mem_tier *m = s;
  atomic_fetch_add(&m->remove_ifs, 1);
  log_op("r", m->id);
  if (m->publish_at_remove_if) mem_store(m, m->pending_key, m->pending, m->pending_len);
  pthread_mutex_lock(&m->mu);
  int rc = CCACHE_MISS;
  for (mem_entry **pp = &m->head; *pp; pp = &(*pp)->next) {
    mem_entry *e = *pp;
    if (e->key.lo == k.lo && e->key.hi == k.hi) {
      if (e->len == len && memcmp(e->blob, blob, len) == 0) {
        *pp = e->next;
        free(e->blob);
        free(e);
        rc = CCACHE_OK;
      }
      break;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

static int m_lock(void *s, ccache_key k, void **lock) {
  mem_tier *m = s;
  atomic_fetch_add(&m->locks, 1);
  log_op("L", m->id);
  if (m->lock_rc) return m->lock_rc;
  if (m->busy) return CCACHE_EBUSY;
  *lock = (void *)(uintptr_t)(k.lo + 1);
  return CCACHE_OK;
}

static int m_renew(void *s, void *lock) {
  mem_tier *m = s;
  (void)lock;
  pthread_mutex_lock(&m->rmu);
  if (m->renewers_seen == 0 || !pthread_equal(m->renewer, pthread_self())) {
    m->renewer = pthread_self();
    m->renewers_seen++;
  }
  atomic_fetch_add(&m->renews, 1);
  pthread_cond_broadcast(&m->rcv);
  pthread_mutex_unlock(&m->rmu);
  return m->renew_rc;
}

static void m_unlock(void *s, void *lock) {
  mem_tier *m = s;
  (void)lock;
  atomic_fetch_add(&m->unlocks, 1);
  log_op("U", m->id);
}

/* close() does not free the mem_tier: the test reads its counters after the
 * cache is gone, and frees it with mem_free(). */
static void m_close(void *s) {
  mem_tier *m = s;
  atomic_fetch_add(&m->closes, 1);
}

static mem_tier *mem_new(int id) {
  mem_tier *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->id = id;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->rmu, NULL);
  pthread_cond_init(&m->rcv, NULL);
  return m;
}

static void mem_free(mem_tier *m) {
  while (m->head) {
    mem_entry *e = m->head;
    m->head = e->next;
    free(e->blob);
    free(e);
  }
  free(m->pending);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->rmu);
  pthread_cond_destroy(&m->rcv);
  free(m);
}

static ccache_tier_ops mem_ops(bool locks, uint64_t lease_ms) {
  ccache_tier_ops o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.name = "mem";
  o.flags = CCACHE_TIER_PRIVATE; /* this process's memory */
  o.attach = m_attach;
  o.get = m_get;
  o.free_blob = m_free_blob;
  o.put = m_put;
  o.remove = m_remove;
  if (locks) {
    o.lock = m_lock;
    o.unlock = m_unlock;
    o.renew = lease_ms ? m_renew : NULL;
    o.lease_ms = lease_ms;
    o.poll_ms = 1;
    o.poll_max_ms = 4;
    o.wait_ms = 60000;
  }
  o.close = m_close;
  return o;
}

static ccache_tier *mem_tier_of(mem_tier *m, const ccache_tier_ops *o) {
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(o, m, &t), CCACHE_OK);
  return t;
}

/* A cache over n memory tiers (all with the same ops) and the test codec. */
typedef struct rig {
  t_ctx t;
  t_codec codec;
  t_compiler comp;
  mem_tier *m[CCACHE_MAX_TIERS];
  unsigned n;
  ccache *c;
} rig;

static void rig_open_ops(rig *r, unsigned n, const ccache_tier_ops *ops, const char *tag,
                         uint64_t min_us) {
  memset(r, 0, sizeof *r);
  op_log[0] = '\0';
  ccache_codec k = t_codec_make(&r->codec, 64);
  ccache_tier *tiers[CCACHE_MAX_TIERS];
  for (unsigned i = 0; i < n; i++) {
    r->m[i] = mem_new((int)i);
    tiers[i] = mem_tier_of(r->m[i], ops);
  }
  r->n = n;
  ccache_config cfg;
  t_config(&cfg, &r->t);
  cfg.codec = &k;
  cfg.runtime_tag = tag;
  cfg.tier_min_compile_us = min_us;
  cfg.tiers = tiers;
  cfg.n_tiers = n;
  assert_int_equal(ccache_open(&cfg, &r->c), CCACHE_OK);
}

static void rig_open(rig *r, unsigned n, bool locks) {
  ccache_tier_ops o = mem_ops(locks, 0);
  rig_open_ops(r, n, &o, "rt-1", 0);
}

static void rig_close(rig *r) {
  t_check(r->c, &r->t);
  t_close(r->c);
  for (unsigned i = 0; i < r->n; i++) {
    assert_int_equal(r->m[i]->closes, 1);
    /* Every blob a get() handed out came back through free_blob. */
    assert_int_equal(r->m[i]->frees, r->m[i]->get_hits);
    mem_free(r->m[i]);
  }
  /* Every successful encode was given back once; no bad bytes were decoded. */
  assert_int_equal(r->codec.encoded, r->codec.frees);
  assert_int_equal(r->codec.bad_loads, 0);
}

static void seed(mem_tier *m, ccache_key k, const char *tag, int id) {
  size_t len;
  unsigned char *e = t_entry(k, tag, id, 64, &len);
  mem_store(m, k, e, len);
  free(e);
}

/* ------------------------------------------------------------- the tests */

static uint32_t st_group(void *s, const void *lock);

static void tier_custom_validates_ops(void **state) {
  (void)state;
  mem_tier *m = mem_new(0);
  ccache_tier *t = NULL;
  ccache_tier_ops o = mem_ops(true, 30);
  assert_int_equal(ccache_tier_custom(NULL, m, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_custom(&o, m, NULL), CCACHE_EINVAL);
  ccache_tier_ops b = o;
  b.size = CCACHE_TIER_OPS_SIZE_V1 - 1;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.get = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.put = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.free_blob = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.unlock = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.poll_ms = 0;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.poll_max_ms = 0;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.lease_ms = 2;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.renew = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.renew_group = st_group, b.renew_groups = CCACHE_MAX_RENEW_GROUPS + 1;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  assert_null(t);
  assert_int_equal(m->closes, 0); /* refused: the state is still ours */
  /* Without lock, the lock parameters do not matter; name defaults. */
  b = o, b.lock = NULL, b.unlock = NULL, b.renew = NULL, b.poll_ms = 0, b.name = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_OK);
  assert_string_equal(t->ops.name, "custom");
  ccache_tier_free(t);
  assert_int_equal(m->closes, 1);
  ccache_tier_free(NULL);
  mem_free(m);
}

static void open_validates_tiers_and_codec(void **state) {
  (void)state;
  t_ctx t = {0};
  t_codec tc;
  ccache_codec k = t_codec_make(&tc, 64);
  mem_tier *m = mem_new(0);
  ccache_tier_ops o = mem_ops(false, 0);
  ccache_tier *a = mem_tier_of(m, &o), *b = mem_tier_of(m, &o);
  ccache_tier *list[CCACHE_MAX_TIERS + 1];
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) list[i] = a;
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.codec = &k;
  ccache *c = NULL;
  cfg.tiers = NULL, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  ccache_tier *withnull[2] = {a, NULL};
  cfg.tiers = withnull, cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  cfg.tiers = list, cfg.n_tiers = 2; /* a twice */
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  ccache_tier *many[CCACHE_MAX_TIERS + 1];
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) many[i] = mem_tier_of(m, &o);
  cfg.tiers = many, cfg.n_tiers = CCACHE_MAX_TIERS + 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) ccache_tier_free(many[i]);
  ccache_codec bad = k;
  bad.decode = NULL;
  cfg.codec = &bad, cfg.tiers = &a, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  assert_int_equal(m->closes, CCACHE_MAX_TIERS + 1); /* only the 9 freed above */
  assert_int_equal(m->attaches, 0);

  /* a goes to one cache; a second cache cannot take it. */
  cfg.codec = &k;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(m->attaches, 1);
  ccache *c2 = NULL;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_EINVAL);
  ccache_tier *ab[2] = {b, a};
  cfg.tiers = ab, cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_EINVAL);
  /* ...and b, refused along with a, is still the caller's and unclaimed. */
  cfg.tiers = &b, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_OK);
  t_close(c2);
  t_close(c);
  assert_int_equal(m->closes, CCACHE_MAX_TIERS + 3);
  mem_free(m);
}

/* 0.2.0's layout is the first with a size and a magic, so a struct that ends
 * before the tier fields was never released: refused (CCACHE_EINVAL), and
 * nothing past its end is read (the struct sits alone in a heap block of
 * exactly that size, so ASan would see it).  A struct of 0.2.0's size (up
 * to trust_flags) opens. */
static void config_from_before_the_tiers(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache_config full;
  t_config(&full, &t);
  const size_t old = offsetof(ccache_config, codec);
  unsigned char *raw = malloc(old);
  assert_non_null(raw);
  memcpy(raw, &full, old);
  uint32_t size = (uint32_t)old;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  const ccache_config *cfg = (const ccache_config *)(void *)raw;
  ccache *c = NULL;
  assert_int_equal(ccache_open(cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  size = (uint32_t)old - 1;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  assert_int_equal(ccache_open(cfg, &c), CCACHE_EINVAL);
  free(raw);
  /* 0.2.0's size, alone in its block: opens, no tiers. */
  const size_t v020 = offsetof(ccache_config, trust_flags) + sizeof full.trust_flags;
  raw = malloc(v020);
  assert_non_null(raw);
  memcpy(raw, &full, v020);
  size = (uint32_t)v020;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  cfg = (const ccache_config *)(void *)raw;
  assert_int_equal(ccache_open(cfg, &c), CCACHE_OK);
  t_compiler comp = {0};
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_misses + s.tier_hits + s.tier_errors, 0);
  t_close(c);
  free(raw);
}

static void miss_compiles_once_and_stores_in_every_tier(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, false);
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_int_equal(r.comp.calls, 1);
  assert_string_equal(op_log, "g0 g1 P0 P1");
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.program_misses, 1);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_writes, 2);
  assert_int_equal(s.tier_bytes_written, 2 * ccache__tier_entry_len(64));
  assert_int_equal(s.tier_errors, 0);
  /* Each tier holds exactly the entry the format defines. */
  size_t len;
  unsigned char *want = t_entry(PK(7), "rt-1", 7, 64, &len);
  for (int i = 0; i < 2; i++) {
    mem_entry *e = mem_find(r.m[i], PK(7));
    assert_non_null(e);
    assert_int_equal(e->len, len);
    /* bytes 48..55 hold the creation time, which differs */
    assert_memory_equal(e->blob, want, 48);
    assert_memory_equal(e->blob + 56, want + 56, 64);
  }
  free(want);
  /* t_goc released the only handle, so the program left the table: the
   * next fetch is a program miss that tier 0 serves, without compiling. */
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_string_equal(op_log, "g0");
  assert_int_equal(r.comp.calls, 1);
  s = t_stats(r.c);
  assert_int_equal(s.program_misses, 2);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_hits, 1);
  /* While a handle is held, a fetch is a program hit: no tier is asked. */
  ccache_program *held = NULL;
  assert_int_equal(ccache_program_get_or_compile(r.c, PK(7), t_compile, &r.comp, &held), CCACHE_OK);
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_string_equal(op_log, "");
  ccache_program_release(r.c, held);
  rig_close(&r);
}

static void namespace_is_format_and_tag_hash(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  char want[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash("rt-1"), want);
  assert_string_equal(r.m[0]->ns, want);
  assert_int_equal(strlen(want), 3 + 16);
  assert_memory_equal(want, "v1/", 3);
  rig_close(&r);
}

static void hit_in_lower_tier_fills_above_without_compiling(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 3, false);
  seed(r.m[2], PK(9), "rt-1", 9);
  assert_int_equal(t_goc(r.c, PK(9), &r.comp, CCACHE_OK), 9);
  assert_string_equal(op_log, "g0 g1 g2 P0 P1");
  assert_int_equal(r.comp.calls, 0);
  assert_int_equal(r.codec.decodes, 1);
  assert_int_equal(r.codec.encodes, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.program_misses, 1);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_misses, 0);
  assert_int_equal(s.tier_writes, 2);
  assert_int_equal(s.tier_bytes_read, ccache__tier_entry_len(64));
  assert_int_equal(s.compile_ns, 0);
  /* The filled copies are the very bytes of the lower tier's entry. */
  mem_entry *low = mem_find(r.m[2], PK(9));
  for (int i = 0; i < 2; i++) {
    mem_entry *e = mem_find(r.m[i], PK(9));
    assert_non_null(e);
    assert_int_equal(e->len, low->len);
    assert_memory_equal(e->blob, low->blob, low->len);
  }
  /* A hit in the top tier asks nothing below it. */
  seed(r.m[0], PK(10), "rt-1", 10);
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(10), &r.comp, CCACHE_OK), 10);
  assert_string_equal(op_log, "g0");
  rig_close(&r);
}

static void codec_skip_and_min_compile_time_store_nothing(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(false, 0);
  /* SKIP: compiled, not stored, not an error. */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  r.codec.encode_rc = CCACHE_CODEC_SKIP;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(r.codec.encodes, 1);
  assert_int_equal(r.m[0]->puts, 0);
  assert_int_equal(s.tier_writes + s.tier_errors, 0);
  assert_int_equal(s.tier_misses, 1);
  rig_close(&r);
  /* A threshold no compile reaches: never encoded, never stored. */
  rig_open_ops(&r, 1, &o, "rt-1", UINT64_MAX);
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(r.codec.encodes, 0);
  assert_int_equal(r.m[0]->puts, 0);
  s = t_stats(r.c);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_writes, 0);
  rig_close(&r);
  /* Threshold 0: every compile is stored. */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(r.m[0]->puts, 1);
  rig_close(&r);
}

static void codec_failures_never_fail_a_fetch(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  r.codec.encode_rc = -5;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 1);
  assert_int_equal(s.tier_writes, 0);
  assert_int_equal(r.codec.frees, 0); /* a failed encode gave nothing back */
  r.codec.encode_rc = 0;
  /* decode fails on a good entry: compiled instead, and the store replaces it. */
  seed(r.m[0], PK(2), "rt-1", 2);
  r.codec.decode_rc = -1;
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 2);
  assert_int_equal(s.tier_corrupt, 0);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.program_compiles, 2);
  assert_int_equal(r.comp.calls, 2);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(r.m[0]->puts, 1);
  r.codec.decode_rc = 0;
  rig_close(&r);
}

static void op_failures_never_fail_a_fetch(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, true);
  r.m[0]->get_rc = CCACHE_EIO;
  r.m[0]->put_rc = CCACHE_EIO;
  r.m[0]->lock_rc = CCACHE_EIO;
  seed(r.m[1], PK(3), "rt-1", 3);
  /* tier 0 fails its get, its lock (taken before tier 1 is asked) and its
   * re-check; tier 1 hits; filling tier 0 fails. */
  assert_int_equal(t_goc(r.c, PK(3), &r.comp, CCACHE_OK), 3);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_writes, 0);
  /* A miss: get fails, lock fails (proceeds without it), put fails. */
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(4), &r.comp, CCACHE_OK), 4);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 P0 P1 U1");
  s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 4 + 4);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(s.program_compiles, 1);
  rig_close(&r);

  /* A tier whose attach fails is never asked. */
  ccache_tier_ops o = mem_ops(false, 0);
  memset(&r, 0, sizeof r);
  mem_tier *bad = mem_new(0), *good = mem_new(1);
  bad->attach_rc = CCACHE_EIO;
  ccache_codec k = t_codec_make(&r.codec, 64);
  ccache_tier *tiers[2] = {mem_tier_of(bad, &o), mem_tier_of(good, &o)};
  ccache_config cfg;
  t_config(&cfg, &r.t);
  cfg.codec = &k;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = tiers;
  cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &r.c), CCACHE_OK);
  assert_int_equal(t_stats(r.c).tier_errors, 1);
  assert_int_equal(t_goc(r.c, PK(5), &r.comp, CCACHE_OK), 5);
  assert_int_equal(bad->gets + bad->puts, 0);
  assert_int_equal(good->gets, 1);
  assert_int_equal(good->puts, 1);
  r.m[0] = bad, r.m[1] = good, r.n = 2;
  rig_close(&r);
}

static void corrupt_entry_is_counted_removed_and_recompiled(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  /* A flipped payload bit, a truncated entry, an entry under another key. */
  size_t len;
  unsigned char *e = t_entry(PK(1), "rt-1", 1, 64, &len);
  e[CCACHE__TIER_HDR + 10] ^= 0x01;
  mem_store(r.m[0], PK(1), e, len);
  free(e);
  e = t_entry(PK(2), "rt-1", 2, 64, &len);
  mem_store(r.m[0], PK(2), e, len - 1);
  free(e);
  e = t_entry(PK(99), "rt-1", 3, 64, &len);
  mem_store(r.m[0], PK(3), e, len);
  free(e);
  for (int k = 1; k <= 3; k++) assert_int_equal(t_goc(r.c, PK(k), &r.comp, CCACHE_OK), k);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 3);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_misses, 3);
  assert_int_equal(r.m[0]->removes, 3);
  assert_int_equal(r.codec.decodes, 0); /* no bad byte reached the codec */
  assert_int_equal(r.comp.calls, 3);
  assert_int_equal(r.m[0]->puts, 3); /* and good entries replaced them */
  rig_close(&r);
}

static void foreign_tag_is_a_miss_not_corrupt(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  seed(r.m[0], PK(1), "rt-2", 1); /* intact, another runtime's */
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 0);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(r.codec.decodes, 0);
  assert_int_equal(r.comp.calls, 1);
  rig_close(&r);
}

static void entry_format_is_pinned(void **state) {
  (void)state;
  unsigned char payload[3] = {0xAA, 0xBB, 0xCC};
  ccache_key k = {0x0102030405060708ull, 0x1112131415161718ull};
  unsigned char e[CCACHE__TIER_HDR + 3 + CCACHE__TIER_SUM];
  assert_int_equal(ccache__tier_entry_len(3), sizeof e);
  ccache__tier_frame(e, k, 0x2122232425262728ull, 0x3132333435363738ull, payload, 3);
  static const unsigned char hdr[CCACHE__TIER_HDR] = {
      'C',  'C',  'T',  'I',  'E',  'R',  0,    '\n', 1,    0,    0,    0,    56,   0,
      0,    0,    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x18, 0x17, 0x16, 0x15,
      0x14, 0x13, 0x12, 0x11, 0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 3,    0,
      0,    0,    0,    0,    0,    0,    0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31};
  assert_memory_equal(e, hdr, sizeof hdr);
  assert_memory_equal(e + CCACHE__TIER_HDR, payload, 3);
  const void *p = NULL;
  size_t n = 0;
  assert_int_equal(ccache__tier_verify(e, sizeof e, k, 0x2122232425262728ull, &p, &n),
                   CCACHE__ENTRY_OK);
  assert_ptr_equal(p, e + CCACHE__TIER_HDR);
  assert_int_equal(n, 3);
  assert_int_equal(ccache__tier_verify(e, sizeof e, k, 1, &p, &n), CCACHE__ENTRY_FOREIGN);
  /* Every single-bit flip anywhere, and every truncation, is corrupt. */
  for (size_t i = 0; i < sizeof e; i++) {
    for (int bit = 0; bit < 8; bit++) {
      e[i] ^= (unsigned char)(1u << bit);
      assert_int_equal(ccache__tier_verify(e, sizeof e, k, 0x2122232425262728ull, &p, &n),
                       CCACHE__ENTRY_CORRUPT);
      e[i] ^= (unsigned char)(1u << bit);
    }
  }
  for (size_t cut = 0; cut < sizeof e; cut++)
    assert_int_equal(ccache__tier_verify(e, cut, k, 0x2122232425262728ull, &p, &n),
                     CCACHE__ENTRY_CORRUPT);
  assert_int_equal(ccache__tier_verify(NULL, 0, k, 0, &p, &n), CCACHE__ENTRY_CORRUPT);
}

static void locks_taken_in_tier_order_released_in_reverse(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 3, true);
  assert_int_equal(t_goc(r.c, PK(5), &r.comp, CCACHE_OK), 5);
  /* tier by tier: lookup, lock, re-check; store; reverse unlock */
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 g2 L2 g2 P0 P1 P2 U2 U1 U0");
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_lock_waits, 0);
  /* A failed compile still releases every lock, and stores nothing. */
  op_log[0] = '\0';
  r.comp.fail = 1;
  assert_int_equal(t_goc(r.c, PK(6), &r.comp, CCACHE_ECOMPILE), -1);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 g2 L2 g2 U2 U1 U0");
  s = t_stats(r.c);
  assert_int_equal(s.program_compile_failures, 1);
  assert_int_equal(s.program_compiles, 2);
  rig_close(&r);
}

static void entry_found_after_taking_a_lock_is_loaded(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, true);
  /* Tier 1's entry appears at its second get: the re-check after its lock. */
  size_t len;
  r.m[1]->pending = t_entry(PK(8), "rt-1", 8, 64, &len);
  r.m[1]->pending_len = len;
  r.m[1]->pending_key = PK(8);
  r.m[1]->publish_at_get = 2;
  assert_int_equal(t_goc(r.c, PK(8), &r.comp, CCACHE_OK), 8);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 P0 U1 U0");
  assert_int_equal(r.comp.calls, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.program_compiles, 0);
  rig_close(&r);
}

static void busy_lock_waits_then_loads_the_published_entry(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, true);
  mem_tier *m = r.m[0];
  m->busy = 1; /* another process compiles PK(4) ... */
  size_t len;
  m->pending = t_entry(PK(4), "rt-1", 4, 64, &len);
  m->pending_len = len;
  m->pending_key = PK(4);
  m->publish_at_get = 4; /* ... and publishes it before our 4th look */
  assert_int_equal(t_goc(r.c, PK(4), &r.comp, CCACHE_OK), 4);
  assert_string_equal(op_log, "g0 L0 g0 L0 g0 L0 g0");
  assert_int_equal(r.comp.calls, 0);
  assert_int_equal(m->unlocks, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.program_misses, 1);
  rig_close(&r);
}

static void wait_timeout_compiles_locally(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  o.wait_ms = 20; /* a real, short bound: what is checked is that it ends */
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  r.m[0]->busy = 1; /* held forever by someone else */
  assert_int_equal(t_goc(r.c, PK(6), &r.comp, CCACHE_OK), 6);
  assert_int_equal(r.comp.calls, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max >= 20);
  assert_int_equal(s.tier_misses, 1);
  /* Gave up on tier 0's lock: no later lock was taken; stored everywhere. */
  assert_int_equal(r.m[1]->locks, 0);
  assert_int_equal(r.m[0]->unlocks + r.m[1]->unlocks, 0);
  assert_int_equal(s.tier_writes, 2);
  rig_close(&r);
}

/* The compile holds a leased lock until the renewal thread has renewed it
 * renewals_wanted times (a condition wait, bounded at 30 s). */
static int renewals_wanted;
static void wait_for_renewals(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  (void)pkey;
  mem_tier *m = comp->arg;
  int target = atomic_load(&m->renews) + renewals_wanted;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&m->rmu);
  while (atomic_load(&m->renews) < target)
    if (pthread_cond_timedwait(&m->rcv, &m->rmu, &until) != 0) break;
  pthread_mutex_unlock(&m->rmu);
}

static void renewal_thread_renews_leases(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 30); /* renewed every 10 ms */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 0); /* started lazily */
  r.comp.during = wait_for_renewals;
  r.comp.arg = r.m[0];
  renewals_wanted = 3;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_true(r.m[0]->renews >= 3);
  assert_int_equal(r.m[0]->renewers_seen, 1);
  assert_false(pthread_equal(r.m[0]->renewer, pthread_self())); /* never the compiler */
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1);
  /* A second compile: the same one thread renews. */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_true(r.m[0]->renews >= 6);
  assert_int_equal(r.m[0]->renewers_seen, 1);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1);
  assert_int_equal(r.m[0]->unlocks, 2);
  assert_int_equal(t_stats(r.c).tier_errors, 0);
  rig_close(&r);
  assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0); /* joined at close */
}

/* Waits (bounded, as wait_for_renewals) until lost_tier's lease has had
 * its first renewal, then for renewals_wanted more of comp->arg's. */
static mem_tier *lost_tier;
static void wait_for_loss_then_renewals(t_compiler *comp, ccache *c, ccache_key pkey) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&lost_tier->rmu);
  while (atomic_load(&lost_tier->renews) < 1)
    if (pthread_cond_timedwait(&lost_tier->rcv, &lost_tier->rmu, &until) != 0) break;
  pthread_mutex_unlock(&lost_tier->rmu);
  wait_for_renewals(comp, c, pkey);
}

static void lost_lease_is_counted_and_the_compile_goes_on(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 3); /* both renewed every 1 ms */
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  /* Tier 0's lease is lost at its first renewal: "no longer yours" (a
   * renewal that got no answer would be retried while the lease holds). */
  r.m[0]->renew_rc = CCACHE_EBUSY;
  /* The compile runs until tier 0's lease was lost (its first renewal: on
   * a loaded machine that can come after tier 1's fifth), then until tier
   * 1's healthy lease was renewed 5 more times: time for tier 0's to be
   * renewed as often, were a lost lease renewed. */
  lost_tier = r.m[0];
  r.comp.during = wait_for_loss_then_renewals;
  r.comp.arg = r.m[1];
  renewals_wanted = 5;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_true(r.m[1]->renews >= 5);
  /* One failed renewal, counted, never retried; the program was still
   * compiled, stored and unlocked. */
  assert_int_equal(r.m[0]->renews, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 1);
  assert_int_equal(s.tier_leases_lost, 1);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(r.m[0]->puts + r.m[1]->puts, 2);
  assert_int_equal(r.m[0]->unlocks + r.m[1]->unlocks, 2);
  rig_close(&r);
}

/* Closing from inside a compile that holds tier locks is refused; the locks
 * are released when the compile ends, and then close works. */
static ccache *close_target;
static int close_rc;
static void try_close(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)pkey;
  close_rc = ccache_close(c);
  close_target = c;
}

static void close_while_a_compile_holds_a_lock(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 300);
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  r.comp.during = try_close;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_ptr_equal(close_target, r.c);
  assert_int_equal(close_rc, CCACHE_EBUSY);
  assert_int_equal(r.m[0]->locks, 1);
  assert_int_equal(r.m[0]->unlocks, 1);
  assert_int_equal(r.m[0]->closes, 0);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1); /* the renewal thread */
  rig_close(&r); /* closes the tier once, joins the thread */
  assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0);
}

/* Concurrent misses on one key: the tiers are asked by the flight's owner
 * only. */
typedef struct goc_arg {
  rig *r;
  int rc, id;
} goc_arg;

static void *goc_thread(void *p) {
  goc_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->r->c, PK(3), t_compile, &a->r->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->r->c, prog);
  }
  return NULL;
}

/* Inside the compile: wait (bounded) until the other 7 threads joined. */
static void wait_for_joiners(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)pkey;
  for (int i = 0; i < 30000; i++) {
    if (t_stats(c).program_waits >= 7) return;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

static void one_flight_asks_the_tiers_once(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, true);
  r.comp.during = wait_for_joiners;
  pthread_t th[8];
  goc_arg a[8];
  for (int i = 0; i < 8; i++) {
    a[i].r = &r;
    a[i].rc = -100;
    assert_int_equal(pthread_create(&th[i], NULL, goc_thread, &a[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(a[i].rc, CCACHE_OK);
    assert_int_equal(a[i].id, 3);
  }
  assert_int_equal(r.comp.calls, 1);
  assert_int_equal(r.m[0]->gets, 2); /* lookup, re-check after the lock */
  assert_int_equal(r.m[0]->locks, 1);
  assert_int_equal(r.m[0]->puts, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(s.program_waits, 7);
  rig_close(&r);
}

static void redis_stub_and_error_detail(void **state) {
  (void)state;
  ccache_redis_options o;
  memset(&o, 0x5A, sizeof o);
  ccache_redis_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_null(o.servers);
  assert_string_equal(o.prefix, "ccache");
  assert_true(o.connect_timeout_ms == 200 && o.command_timeout_ms == 1000);
  assert_true(o.entry_ttl_ms == CCACHE_UNBOUNDED && o.lease_ms == 10000);
  assert_true(o.poll_ms == 5 && o.poll_max_ms == 200 && o.wait_ms == 120000);
  assert_true(o.reconnect_min_ms == 100 && o.reconnect_max_ms == 5000);
  ccache_redis_options_init(NULL);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(NULL, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_redis(&o, NULL), CCACHE_EINVAL);
  o.servers = "127.0.0.1:6379";
  int rc = ccache_tier_redis(&o, &t);
  if (rc == CCACHE_ENOTSUP) { /* the stub build */
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), "hiredis"));
  } else {
    assert_int_equal(rc, CCACHE_OK);
    ccache_tier_free(t);
  }
  assert_string_not_equal(ccache_strerror(CCACHE_ENOTSUP), ccache_strerror(12345));
  assert_string_not_equal(ccache_strerror(CCACHE_EPERM), ccache_strerror(12345));
  assert_string_not_equal(ccache_strerror(CCACHE_EIO), ccache_strerror(12345));
}

/* Another thread's detail: a copy, since its storage ends with the thread. */
static void *detail_thread(void *p) {
  (void)p;
  return strdup(ccache_error_detail());
}

static void error_detail_is_per_thread(void **state) {
  (void)state;
  ccache__detail("first %d", 1);
  assert_string_equal(ccache_error_detail(), "first 1");
  pthread_t th;
  char *other = NULL;
  assert_int_equal(pthread_create(&th, NULL, detail_thread, NULL), 0);
  pthread_join(th, (void **)&other);
  assert_non_null(other);
  assert_string_equal(other, ""); /* nothing recorded on that thread */
  free(other);
  assert_string_equal(ccache_error_detail(), "first 1");
  char big[2000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ccache__detail("%s", big);
  assert_true(strlen(ccache_error_detail()) < sizeof big - 1); /* truncated, terminated */
}

static void default_instance_takes_its_tiers(void **state) {
  (void)state;
  static t_codec tc;
  static t_compiler comp;
  ccache_codec k = t_codec_make(&tc, 64);
  mem_tier *m1 = mem_new(0), *m2 = mem_new(1);
  ccache_tier_ops o = mem_ops(false, 0);
  ccache_tier *t1 = mem_tier_of(m1, &o), *t2 = mem_tier_of(m2, &o);
  static t_ctx t;
  ccache_config cfg;
  t_config(&cfg, &t); /* (its destroy callbacks free the decoded native) */
  cfg.codec = &k;
  cfg.tier_min_compile_us = 0;
  cfg.runtime_tag = "default-tag";
  cfg.tiers = &t1;
  cfg.n_tiers = 1;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_OK);
  /* Replacing the configuration frees a tier it no longer lists. */
  cfg.tiers = &t2;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_OK);
  assert_int_equal(m1->closes, 1);
  seed(m2, PK(11), "default-tag", 11);
  ccache *d = NULL;
  assert_int_equal(ccache_default(&d), CCACHE_OK);
  assert_int_equal(m2->attaches, 1);
  assert_int_equal(t_goc(d, PK(11), &comp, CCACHE_OK), 11);
  assert_int_equal(comp.calls, 0);
  assert_int_equal(t_stats(d).tier_hits, 1);
  cfg.tiers = NULL; /* (t2 is the instance's now: listing it again is EINVAL) */
  cfg.n_tiers = 0;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_EBUSY);
  mem_free(m1);
  /* m2 belongs to the default instance for the life of the process. */
}

/* ---------------------------------------------------- issue 20: tier faults */

/* Item 4: a bad entry is removed through remove_if with the bytes read; an
 * entry published between the read and the removal survives and is loaded
 * (no compile); remove() is never called when remove_if is there. */
static void bad_entry_removed_only_if_still_the_one_read(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  o.remove_if = m_remove_if;
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  size_t len;
  unsigned char *bad = t_entry(PK(1), "rt-1", 1, 64, &len);
  bad[CCACHE__TIER_HDR + 10] ^= 0x01;
  mem_store(r.m[0], PK(1), bad, len);
  /* Another process publishes a good entry just before the removal. */
  r.m[0]->pending = t_entry(PK(1), "rt-1", 1, 64, &r.m[0]->pending_len);
  r.m[0]->pending_key = PK(1);
  r.m[0]->publish_at_remove_if = 1;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 1);
  assert_int_equal(r.m[0]->remove_ifs, 1);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(s.tier_hits, 1); /* the survivor, loaded after the lock */
  assert_int_equal(r.comp.calls, 0);
  assert_string_equal(op_log, "g0 r0 L0 g0 U0");
  /* Without a race the bad entry goes. */
  r.m[0]->publish_at_remove_if = 0;
  mem_store(r.m[0], PK(2), bad, len); /* bad for PK(2) too: its key is PK(1) */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_int_equal(r.m[0]->remove_ifs, 2);
  assert_int_equal(t_stats(r.c).tier_corrupt, 2);
  assert_int_equal(r.comp.calls, 1);
  free(bad);
  rig_close(&r);
}

/* A tier whose renew() blocks, per renewal group, until released: what a
 * stopped server does to a blocking renew. */
typedef struct stall_tier {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int blocked_group; /* -1: none */
  int stalled;       /* a renew is blocked right now */
  int renews[2];     /* by group */
  int groups;        /* 0: no renew_group op */
} stall_tier;

static uint32_t st_group(void *s, const void *lock) {
  (void)s;
  return (uint32_t)(((uintptr_t)lock - 1) % 2);
}

static int st_renew(void *s, void *lock) {
  stall_tier *t = s;
  int g = t->groups ? (int)st_group(s, lock) : 0;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&t->mu);
  t->renews[g]++;
  pthread_cond_broadcast(&t->cv);
  while (t->blocked_group == g) {
    t->stalled = 1;
    pthread_cond_broadcast(&t->cv);
    if (pthread_cond_timedwait(&t->cv, &t->mu, &until) != 0) break;
  }
  t->stalled = 0;
  pthread_mutex_unlock(&t->mu);
  return CCACHE_OK;
}

static int st_lock(void *s, ccache_key k, void **lock) {
  (void)s;
  *lock = (void *)(uintptr_t)(k.lo + 1);
  return CCACHE_OK;
}
static void st_unlock(void *s, void *lock) { (void)s, (void)lock; }
static int st_get(void *s, ccache_key k, void **blob, size_t *len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_MISS;
}
static void st_free_blob(void *s, void *blob, size_t len) { (void)s, (void)blob, (void)len; }
static int st_put(void *s, ccache_key k, const void *blob, size_t len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_OK;
}

static ccache_tier *stall_tier_make(stall_tier *t, int groups) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->blocked_group = -1;
  t->groups = groups;
  ccache_tier_ops o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.name = "stall";
  o.flags = CCACHE_TIER_PRIVATE;
  o.get = st_get;
  o.free_blob = st_free_blob;
  o.put = st_put;
  o.lock = st_lock;
  o.unlock = st_unlock;
  o.renew = st_renew;
  o.lease_ms = 30; /* renewed every 10 ms */
  o.poll_ms = 1;
  o.poll_max_ms = 4;
  o.wait_ms = 1000;
  if (groups) {
    o.renew_group = st_group;
    o.renew_groups = (uint32_t)groups;
  }
  ccache_tier *out = NULL;
  assert_int_equal(ccache_tier_custom(&o, t, &out), CCACHE_OK);
  return out;
}

/* The nested compiles of the test: the outer one (a lease in the stalled
 * place) runs the inner one (a lease elsewhere), which waits until the
 * stalled renew is blocked and then for 5 renewals elsewhere (bounded). */
static stall_tier *stall_a, *stall_b; /* where the stall is, where it must not reach */
static int stall_ga, stall_gb;        /* their groups */
static int stall_seen;                /* renewals seen elsewhere during the stall */
static int stall_inner(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  (void)ud, (void)c;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&stall_a->mu);
  stall_a->blocked_group = stall_ga;
  while (!stall_a->stalled)
    if (pthread_cond_timedwait(&stall_a->cv, &stall_a->mu, &until) != 0) break;
  pthread_mutex_unlock(&stall_a->mu);
  pthread_mutex_lock(&stall_b->mu);
  int start = stall_b->renews[stall_gb];
  while (stall_b->renews[stall_gb] < start + 5)
    if (pthread_cond_timedwait(&stall_b->cv, &stall_b->mu, &until) != 0) break;
  stall_seen = stall_b->renews[stall_gb] - start;
  pthread_mutex_unlock(&stall_b->mu);
  pthread_mutex_lock(&stall_a->mu); /* the stall ends */
  stall_a->blocked_group = -1;
  pthread_cond_broadcast(&stall_a->cv);
  pthread_mutex_unlock(&stall_a->mu);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static uint64_t stall_inner_key;
static int stall_outer(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  (void)ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(stall_inner_key), stall_inner, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return rc;
}

static ccache *stall_open(t_ctx *ctx, t_codec *tc, ccache_tier **tiers, uint32_t n) {
  memset(tc, 0, sizeof *tc);
  ccache_codec k = t_codec_make(tc, 64);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = "rt-1";
  cfg.tier_min_compile_us = 0;
  cfg.tiers = tiers;
  cfg.n_tiers = n;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* Item 1 for any tier: a renew blocked in one tier (two tiers), or in one
 * renewal group of a tier (two groups of one tier), never delays the
 * renewal of a lease elsewhere; one thread per (tier, group), started
 * lazily, joined at close. */
static void blocked_renew_never_delays_other_leases(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    stall_tier a, b;
    t_ctx ctx = {0};
    t_codec tc;
    ccache *c;
    if (mode == 0) { /* two tiers, one group each */
      ccache_tier *tiers[2] = {stall_tier_make(&a, 0), stall_tier_make(&b, 0)};
      c = stall_open(&ctx, &tc, tiers, 2);
      stall_a = &a, stall_b = &b, stall_ga = stall_gb = 0;
      stall_inner_key = 2; /* the outer key is 1 */
    } else {               /* one tier, keys in groups 0 and 1 */
      ccache_tier *tiers[1] = {stall_tier_make(&a, 2)};
      c = stall_open(&ctx, &tc, tiers, 1);
      stall_a = stall_b = &a, stall_ga = 0, stall_gb = 1;
      stall_inner_key = 3; /* group 1 (key.lo % 2); the outer key 2: group 0 */
    }
    assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 0);
    stall_seen = 0;
    ccache_program *p = NULL;
    assert_int_equal(ccache_program_get_or_compile(c, PK(mode ? 2 : 1), stall_outer, NULL, &p),
                     CCACHE_OK);
    ccache_program_release(c, p);
    print_message("%s: %d renewals elsewhere while one renew was blocked\n",
                  mode ? "two groups of one tier" : "two tiers", stall_seen);
    assert_true(stall_seen >= 5); /* (the wait may wake after two at once) */
    assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 2); /* one per lane */
    ccache_stats s = t_stats(c);
    assert_int_equal(s.tier_errors + s.tier_leases_lost, 0);
    t_close(c);
    assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0);
    pthread_mutex_destroy(&a.mu);
    pthread_cond_destroy(&a.cv);
    if (mode == 0) {
      pthread_mutex_destroy(&b.mu);
      pthread_cond_destroy(&b.cv);
    }
  }
}

/* Item 10 over the generic path (a backend without a health op) and the
 * directory tier's. */
static void tier_health_reports_each_tier(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.size, sizeof h);
  assert_string_equal(h.kind, "mem");
  assert_int_equal(h.parts, 1);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  assert_int_equal(h.errors + h.leases_held + h.leases_lost + h.lock_waits, 0);
  assert_string_equal(h.where, "");
  assert_string_equal(h.last_error, "");
  /* Tier 0 fails every op. */
  r.m[0]->get_rc = r.m[0]->lock_rc = r.m[0]->put_rc = CCACHE_EIO;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_DOWN);
  assert_int_equal(h.errors, 4); /* get, lock, the get after the lock step, put */
  assert_string_equal(h.last_error, "put: a tier could not be opened or used (I/O error) (-10)");
  assert_int_equal(h.leases_held, 0);
  assert_int_equal(ccache_tier_health_get(r.c, 1, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  assert_int_equal(h.errors, 0);
  assert_int_equal(h.leases_held, 0); /* tier 1's lock was released */
  /* Another process holds tier 1's lock for a while: lock waits. */
  r.m[0]->get_rc = r.m[0]->lock_rc = r.m[0]->put_rc = 0; /* tier 0 recovers */
  r.m[1]->busy = 1;
  r.m[1]->pending = t_entry(PK(2), "rt-1", 2, 64, &r.m[1]->pending_len);
  r.m[1]->pending_key = PK(2);
  r.m[1]->publish_at_get = r.m[1]->gets + 4; /* the lookup, then one per busy answer */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_UP); /* the next op that works */
  assert_int_equal(h.errors, 4);              /* counts stay */
  assert_int_equal(ccache_tier_health_get(r.c, 1, 0, &h), CCACHE_OK);
  assert_int_equal(h.lock_waits, 3);
  /* The end of the iteration, and bad calls. */
  assert_int_equal(ccache_tier_health_get(r.c, 0, 1, &h), CCACHE_MISS);
  assert_int_equal(ccache_tier_health_get(r.c, 2, 0, &h), CCACHE_MISS);
  h.size = CCACHE_TIER_HEALTH_SIZE_V1 - 1;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_EINVAL);
  /* 0.2.0's layout, the first (every field up to failovers), is the
   * smallest accepted, and its fields are all written; leases_retaken is
   * appended right after it. */
  assert_int_equal(CCACHE_TIER_HEALTH_SIZE_V1, offsetof(ccache_tier_health, leases_retaken));
  memset(&h, 0xAB, sizeof h);
  h.size = CCACHE_TIER_HEALTH_SIZE_V1;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.size, CCACHE_TIER_HEALTH_SIZE_V1);
  assert_int_equal(h.errors, 4);
  assert_int_equal(h.fallback_reads, 0);
  assert_int_equal(h.failovers, 0);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.fallback_reads + h.fallback_writes + h.failovers, 0);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, NULL), CCACHE_EINVAL);
  free(r.m[1]->pending);
  r.m[1]->pending = NULL;
  rig_close(&r);

  /* The directory tier names its directory (a cache without a codec is
   * refused at open: test_first_use). */
  char *dir = t_tempdir("health");
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(&d, &t), CCACHE_OK);
  t_ctx ctx = {0};
  ccache_config cfg;
  t_config(&cfg, &ctx);
  t_codec tc = {0};
  ccache_codec k = t_codec_make(&tc, 64);
  cfg.codec = &k;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(ccache_tier_health_get(c, 0, 0, &h), CCACHE_OK);
  assert_string_equal(h.kind, "disk");
  assert_string_equal(h.where, dir);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* The directory tier's remove_if, alone: only the bytes read go. */
static void disk_remove_if_only_the_bytes_read(void **state) {
  (void)state;
  char *dir = t_tempdir("rmif");
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(&d, &t), CCACHE_OK);
  assert_non_null(t->ops.remove_if);
  assert_int_equal(t->ops.attach(t->state, "v1/00000000000000aa"), CCACHE_OK);
  size_t la, lb;
  unsigned char *a = t_entry(PK(1), "x", 1, 500, &la), *b = t_entry(PK(1), "x", 2, 500, &lb);
  assert_int_equal(t->ops.put(t->state, PK(1), a, la), CCACHE_OK);
  /* Replaced by another process after our read of a: */
  assert_int_equal(t->ops.put(t->state, PK(1), b, lb), CCACHE_OK);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), a, la), CCACHE_MISS);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(t->ops.get(t->state, PK(1), &blob, &len), CCACHE_OK);
  assert_true(len == lb && memcmp(blob, b, lb) == 0); /* put back */
  t->ops.free_blob(t->state, blob, len);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), b, lb), CCACHE_OK);
  assert_int_equal(t->ops.get(t->state, PK(1), &blob, &len), CCACHE_MISS);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), b, lb), CCACHE_MISS);
  /* Nothing left aside: the subdirectory holds no file at all. */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "test -z \"$(find '%s/v1/00000000000000aa' -type f)\"", dir);
  assert_int_equal(system(cmd), 0);
  free(a);
  free(b);
  ccache_tier_free(t);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tier_custom_validates_ops),
      cmocka_unit_test(open_validates_tiers_and_codec),
      cmocka_unit_test(config_from_before_the_tiers),
      cmocka_unit_test(miss_compiles_once_and_stores_in_every_tier),
      cmocka_unit_test(namespace_is_format_and_tag_hash),
      cmocka_unit_test(hit_in_lower_tier_fills_above_without_compiling),
      cmocka_unit_test(codec_skip_and_min_compile_time_store_nothing),
      cmocka_unit_test(codec_failures_never_fail_a_fetch),
      cmocka_unit_test(op_failures_never_fail_a_fetch),
      cmocka_unit_test(corrupt_entry_is_counted_removed_and_recompiled),
      cmocka_unit_test(foreign_tag_is_a_miss_not_corrupt),
      cmocka_unit_test(entry_format_is_pinned),
      cmocka_unit_test(locks_taken_in_tier_order_released_in_reverse),
      cmocka_unit_test(entry_found_after_taking_a_lock_is_loaded),
      cmocka_unit_test(busy_lock_waits_then_loads_the_published_entry),
      cmocka_unit_test(wait_timeout_compiles_locally),
      cmocka_unit_test(renewal_thread_renews_leases),
      cmocka_unit_test(lost_lease_is_counted_and_the_compile_goes_on),
      cmocka_unit_test(close_while_a_compile_holds_a_lock),
      cmocka_unit_test(one_flight_asks_the_tiers_once),
      cmocka_unit_test(redis_stub_and_error_detail),
      cmocka_unit_test(error_detail_is_per_thread),
      cmocka_unit_test(default_instance_takes_its_tiers),
      cmocka_unit_test(bad_entry_removed_only_if_still_the_one_read),
      cmocka_unit_test(blocked_renew_never_delays_other_leases),
      cmocka_unit_test(tier_health_reports_each_tier),
      cmocka_unit_test(disk_remove_if_only_the_bytes_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
