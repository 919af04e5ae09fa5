/*
 * mem_tier_support.c - the in-memory tier of the tier-stack tests (see
 * mem_tier_support.h).
 */
#include "mem_tier_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char op_log[512];
static void log_op(const char *what, int tier) {
  size_t n = strlen(op_log);
  snprintf(op_log + n, sizeof op_log - n, "%s%s%d", n ? " " : "", what, tier);
}

mem_entry *mem_find(mem_tier *m, ccache_key k) {
  for (mem_entry *e = m->head; e; e = e->next)
    if (e->key.lo == k.lo && e->key.hi == k.hi) return e;
  return NULL;
}

void mem_store(mem_tier *m, ccache_key k, const void *blob, size_t len) {
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
int m_remove_if(void *s, ccache_key k, const void *blob, size_t len) {
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

mem_tier *mem_new(int id) {
  mem_tier *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->id = id;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->rmu, NULL);
  pthread_cond_init(&m->rcv, NULL);
  return m;
}

void mem_free(mem_tier *m) {
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

ccache_tier_ops mem_ops(bool locks, uint64_t lease_ms) {
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

ccache_tier *mem_tier_of(mem_tier *m, const ccache_tier_ops *o) {
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(o, m, &t), CCACHE_OK);
  return t;
}

void rig_open_ops(rig *r, unsigned n, const ccache_tier_ops *ops, const char *tag,
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

void rig_open(rig *r, unsigned n, bool locks) {
  ccache_tier_ops o = mem_ops(locks, 0);
  rig_open_ops(r, n, &o, "rt-1", 0);
}

void rig_close(rig *r) {
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

void seed(mem_tier *m, ccache_key k, const char *tag, int id) {
  size_t len;
  unsigned char *e = t_entry(k, tag, id, 64, &len);
  mem_store(m, k, e, len);
  free(e);
}
