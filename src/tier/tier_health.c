/*
 * tier_health.c - what ccache_tier_health_get() reports: each tier's own
 * counts (kept by tier.c and tier_renew.c through ccache__tier_fail and the
 * per-tier atomics), completed by the backend's health op where it has one
 * (the Redis tier reports each server as a part of its own).
 */
#include <stdio.h>
#include <string.h>

#include "tier/tier.h"

void ccache__tier_fail(struct ccache__tiers *ts, uint32_t i, ccache_key key, const char *op, int rc,
                       int err, const char *reason) {
  atomic_fetch_add(&ts->errors, 1);
  if (i < ts->n) {
    atomic_fetch_add_explicit(&ts->per[i].errors, 1, memory_order_relaxed);
    atomic_store_explicit(&ts->per[i].failing, 1, memory_order_relaxed);
    char line[CCACHE__TIER_ERROR_LINE];
    snprintf(line, sizeof line, "%s: %s (%d)", op, ccache_strerror(rc), rc);
    ccache__lock(&ts->r_mu);
    memcpy(ts->last_error[i], line, sizeof line);
    ccache__unlock(&ts->r_mu);
  }
  if (ts->on_event) ccache__tier_event(ts, CCACHE_EVENT_TIER_ERROR, i, key, op, rc, err, reason);
}

void ccache__tier_event(struct ccache__tiers *ts, int kind, uint32_t i, ccache_key key,
                        const char *op, int status, int err, const char *reason) {
  ccache_event ev;
  memset(&ev, 0, sizeof ev);
  ev.size = sizeof ev;
  ev.kind = kind;
  ev.level = CCACHE_LEVEL_PROGRAM;
  ev.key = key;
  ev.status = status;
  ev.err = err;
  ev.tier = i;
  ev.tier_name = i < ts->n ? ts->t[i]->ops.name : NULL;
  ev.op = op;
  ev.reason = reason;
  CCACHE__IN_FRAME(ts, ts->on_event(ts->event_ctx, &ev));
}

int ccache__tier_health(struct ccache__tiers *ts, uint32_t tier, uint32_t part,
                        ccache_tier_health *out) {
  if (!ts || tier >= ts->n) return CCACHE_MISS;
  ccache_tier *t = ts->t[tier];
  const ccache__tier_counts *k = &ts->per[tier];
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  h.parts = 1;
  h.kind = t->ops.name;
  if (!ts->has_codec || !ts->usable[tier])
    h.status = CCACHE_TIER_DISABLED;
  else
    h.status =
        atomic_load_explicit(&k->failing, memory_order_relaxed) ? CCACHE_TIER_DOWN : CCACHE_TIER_UP;
  h.errors = atomic_load_explicit(&k->errors, memory_order_relaxed);
  h.lock_waits = atomic_load_explicit(&k->lock_waits, memory_order_relaxed);
  h.leases_held = atomic_load_explicit(&k->leases_held, memory_order_relaxed);
  h.leases_lost = atomic_load_explicit(&k->leases_lost, memory_order_relaxed);
  ccache__lock(&ts->r_mu);
  memcpy(h.last_error, ts->last_error[tier], CCACHE__TIER_ERROR_LINE);
  ccache__unlock(&ts->r_mu);
  if (t->ops.health && !t->kept_disabled) { /* a kept-disabled tier was never used */
    int rc;
    CCACHE__IN_FRAME(ts, rc = t->ops.health(t->state, part, &h));
    if (rc != CCACHE_OK) return CCACHE_MISS;
    /* Whatever the backend wrote: the strings end, the kind is ours. */
    h.where[sizeof h.where - 1] = '\0';
    h.last_error[sizeof h.last_error - 1] = '\0';
    h.kind = t->ops.name;
    h.size = sizeof h;
    if (h.parts == 0) h.parts = 1;
  }
  if (part >= h.parts) return CCACHE_MISS;
  h.size = out->size; /* kept as the caller set it */
  memcpy(out, &h, out->size < sizeof h ? out->size : sizeof h);
  return CCACHE_OK;
}
