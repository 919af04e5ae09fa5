/*
 * tier_open.c - the tier objects (ccache_tier_custom, ccache_tier_free), the
 * checks of a config's tier fields, and a cache's tiers at open and close:
 * ownership, the codec and runtime tag, attach, close, and their counts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/detail.h"
#include <stddef.h>

#include "tier/tier.h"
#include "tier/tier_trust.h"

/* ---------------------------------------------------------- the tier objects */

int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out) {
  if (!ops || !out || ops->size < CCACHE_TIER_OPS_SIZE_V1) return CCACHE_EINVAL;
  if (!ops->get || !ops->free_blob || !ops->put) return CCACHE_EINVAL;
  if (ops->lock) {
    if (!ops->unlock || ops->poll_ms < 1 || ops->poll_max_ms < ops->poll_ms) return CCACHE_EINVAL;
    /* A lease renewed every lease/3 needs lease/3 >= 1 ms. */
    if (ops->lease_ms && (ops->lease_ms < 3 || !ops->renew)) return CCACHE_EINVAL;
  }
  if (ops->renew_group && ops->renew_groups > CCACHE_MAX_RENEW_GROUPS) return CCACHE_EINVAL;
  ccache_tier *t = calloc(1, sizeof *t);
  if (!t) return CCACHE_ENOMEM;
  /* A struct that ends before a field appended after 0.2.0 keeps it 0. */
  memcpy(&t->ops, ops, ops->size < sizeof t->ops ? ops->size : sizeof t->ops);
  t->ops.size = sizeof t->ops;
  if (!t->ops.name) t->ops.name = "custom";
  if (!t->ops.lock) t->ops.lease_ms = 0;
  t->state = state;
  atomic_init(&t->owner, NULL);
  *out = t;
  return CCACHE_OK;
}

void ccache_tier_free(ccache_tier *t) {
  if (!t) return;
  if (t->ops.close) t->ops.close(t->state);
  free(t);
}

/* ------------------------------------------------------------- open, close */

/* Every field read here is in 0.2.0's layout, which ccache_open() requires
 * of every config; a field appended later is read only when the caller's
 * size covers it (offsetof + sizeof), else it has its default. */

int ccache__tiers_check(const ccache_config *cfg) {
  const ccache_codec *k = cfg->codec;
  const char *why = NULL;
  if (k && (!k->encode || !k->free_bytes || !k->decode))
    why = "a codec needs encode, free_bytes and decode";
  else if (cfg->n_tiers > CCACHE_MAX_TIERS)
    why = "more than CCACHE_MAX_TIERS tiers";
  else if (cfg->n_tiers && !cfg->tiers)
    why = "n_tiers > 0 with tiers NULL";
  else if (cfg->tier_max_entry_bytes == 0)
    why = "tier_max_entry_bytes 0 (the default is CCACHE_TIER_MAX_ENTRY_DEFAULT)";
  for (uint32_t i = 0; !why && i < cfg->n_tiers; i++) {
    if (!cfg->tiers[i] || atomic_load(&cfg->tiers[i]->owner))
      why = "a tier that is NULL or already owned by a cache";
    for (uint32_t j = 0; !why && j < i; j++)
      if (cfg->tiers[j] == cfg->tiers[i]) why = "the same tier listed twice";
  }
  if (!why) return CCACHE_OK;
  ccache__detail("ccache_config: %s", why);
  return CCACHE_EINVAL;
}

/* Fail closed (ccache_config::trust_flags): with a codec, a tier others can
 * write needs keys or the explicit CCACHE_TRUST_UNSIGNED. */
static int shared_tiers_ok(const ccache_config *cfg) {
  if (!cfg->codec || cfg->trust) return CCACHE_OK;
  if (cfg->trust_flags & CCACHE_TRUST_UNSIGNED) return CCACHE_OK;
  for (uint32_t i = 0; i < cfg->n_tiers; i++) {
    const ccache_tier *t = cfg->tiers[i];
    if ((t->ops.flags & CCACHE_TIER_PRIVATE) || t->kept_disabled) continue;
    ccache__detail(
        "ccache_config: tier %u (\"%s\") can be written by others and would load unsigned "
        "entries: give the cache trusted keys (ccache_config::trust, ccache/trust.h) or accept "
        "unsigned entries explicitly (ccache_config::trust_flags = CCACHE_TRUST_UNSIGNED)",
        (unsigned)i, t->ops.name);
    return CCACHE_EINVAL;
  }
  return CCACHE_OK;
}

/* Claim every tier for owner, or none (another open may race for the same
 * one). */
static bool claim(const void *owner, ccache_tier *const *tiers, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const void *none = NULL;
    if (!atomic_compare_exchange_strong(&tiers[i]->owner, &none, owner)) {
      while (i-- > 0) atomic_store(&tiers[i]->owner, NULL);
      return false;
    }
  }
  return true;
}

/* With trust: tier i's namespace digest, from the tag, the key mode and
 * what its scope op hands over; a failed op disables it, as attach. */
static void scope(struct ccache__tiers *ts, uint32_t i, const char *tag) {
  ccache_tier *t = ts->t[i];
  unsigned char buf[CCACHE_TIER_SCOPE_MAX];
  size_t len = 0;
  int rc = CCACHE_OK;
  errno = 0;
  if (t->ops.scope) CCACHE__IN_FRAME(ts, rc = t->ops.scope(t->state, buf, sizeof buf, &len));
  if (rc != CCACHE_OK || len > sizeof buf) {
    ts->usable[i] = false;
    ccache__tier_fail(ts, i, (ccache_key){0, 0}, "scope", rc == CCACHE_OK ? CCACHE_EINVAL : rc,
                      errno, "this tier is disabled for this cache");
    return;
  }
  ccache__trust_ns_digest(ts->strong, tag, buf, len, ts->ns[i]);
}

int ccache__tiers_open(struct ccache__tiers **out, const ccache__mem *mem, const void *owner,
                       const ccache_config *cfg) {
  *out = NULL;
  /* Fail closed: a trust object this build cannot honour (no libsodium) or
   * that holds no key refuses the open, whatever the tiers. */
  struct ccache_trust *trust = NULL;
  if (cfg->trust) {
    int trc = ccache__trust_copy(&trust, mem, cfg->trust);
    if (trc != CCACHE_OK) return trc;
  }
  if (cfg->n_tiers == 0 && !cfg->codec) {
    ccache__trust_release(trust, mem);
    return CCACHE_OK;
  }
  int rc = shared_tiers_ok(cfg);
  if (rc != CCACHE_OK) {
    ccache__trust_release(trust, mem);
    return rc;
  }
  struct ccache__tiers *ts = ccache__calloc(mem, sizeof *ts);
  rc = ts ? ccache__tier_renewal_init(ts) : CCACHE_ENOMEM;
  if (rc != CCACHE_OK) {
    ccache__free(mem, ts);
    ccache__trust_release(trust, mem);
    return rc;
  }
  if (!claim(owner, cfg->tiers, cfg->n_tiers)) {
    ccache__tier_renewal_destroy(ts);
    ccache__free(mem, ts);
    ccache__trust_release(trust, mem);
    return CCACHE_EINVAL;
  }
  ts->trust = trust;
  ts->reader = trust && !trust->has_signer;
  ts->mem = *mem;
  ts->owner = owner;
  ts->n = cfg->n_tiers;
  for (uint32_t i = 0; i < ts->n; i++) ts->t[i] = cfg->tiers[i];
  if (cfg->codec) {
    ts->codec = *cfg->codec;
    ts->has_codec = 1;
  }
  ts->tag_hash = ccache__tier_tag_hash(cfg->runtime_tag);
  ts->strong = cfg->key_mode == CCACHE_KEYS_STRONG;
  ts->min_compile_us = cfg->tier_min_compile_us;
  ts->max_entry = cfg->tier_max_entry_bytes;
  if (ts->max_entry > CCACHE__TIER_MAX_ENTRY) ts->max_entry = CCACHE__TIER_MAX_ENTRY;
  ts->on_event = cfg->on_event;
  ts->event_ctx = cfg->event_ctx;
  *out = ts;
  /* Without a codec the tiers are only owned (and closed at close). */
  if (!ts->has_codec) return CCACHE_OK;
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns_mode(ts->tag_hash, ts->strong, ns);
  for (uint32_t i = 0; i < ts->n; i++) {
    ccache_tier *t = ts->t[i];
    if (t->kept_disabled) {
      ts->usable[i] = false;
      snprintf(ts->last_error[i], sizeof ts->last_error[i], "%s", t->kept_disabled);
      continue;
    }
    rc = CCACHE_OK;
    errno = 0;
    if (t->ops.attach) CCACHE__IN_FRAME(ts, rc = t->ops.attach(t->state, ns));
    ts->usable[i] = rc >= 0;
    if (rc < 0)
      ccache__tier_fail(ts, i, (ccache_key){0, 0}, "attach", rc, errno,
                        "this tier is disabled for this cache");
    else if (ts->trust)
      scope(ts, i, cfg->runtime_tag);
  }
  return CCACHE_OK;
}

void ccache__tiers_close(struct ccache__tiers **tsp) {
  struct ccache__tiers *ts = *tsp;
  if (!ts) return;
  ccache__tier_renewal_stop(ts);
  for (uint32_t i = 0; i < ts->n; i++) {
    ccache_tier *t = ts->t[i];
    if (t->ops.close) CCACHE__IN_FRAME(ts, t->ops.close(t->state));
    free(t);
  }
  ccache__tier_renewal_destroy(ts);
  ccache__mem mem = ts->mem;
  ccache__trust_release(ts->trust, &mem);
  ccache__free(&mem, ts);
  *tsp = NULL;
}

void ccache__tier_stats(const struct ccache__tiers *ts, ccache_stats *s) {
  if (!ts) return;
  s->tier_hits = atomic_load(&ts->hits);
  s->tier_misses = atomic_load(&ts->misses);
  s->tier_writes = atomic_load(&ts->writes);
  s->tier_errors = atomic_load(&ts->errors);
  s->tier_corrupt = atomic_load(&ts->corrupt);
  s->tier_bytes_read = atomic_load(&ts->bytes_read);
  s->tier_bytes_written = atomic_load(&ts->bytes_written);
  s->tier_lock_waits = atomic_load(&ts->lock_waits);
  s->tier_wait_ms_max = atomic_load(&ts->wait_ms_max);
  s->tier_leases_lost = atomic_load(&ts->leases_lost);
  uint64_t timeouts = 0;
  for (uint32_t i = 0; i < ts->n; i++)
    if (ts->t[i]->lock_timeouts) timeouts += atomic_load(ts->t[i]->lock_timeouts);
  s->tier_lock_timeouts = timeouts;
  s->tier_oversize = atomic_load(&ts->oversize);
  s->tier_rejected = atomic_load(&ts->rejected);
  s->tier_unpublished = atomic_load(&ts->unpublished);
}
