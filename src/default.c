/*
 * default.c - the process-wide default instance, created on first use.
 *
 * Its bounds may come from the environment.  The variables are deliberately
 * not CCACHE_*: the ccache compiler cache reads every CCACHE_* variable and
 * rejects the ones it does not know, which would break users' builds.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ccache__mutex default_mu = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Atomic(ccache *) default_cache;
static ccache_config default_cfg;
static int default_cfg_set;

/* Accepted: a decimal integer >= 1 with no sign, space or suffix, below
 * UINT64_MAX; or "unbounded" / "infinity".  Unset keeps *v. */
static int parse_bound(const char *name, uint64_t *v) {
  const char *s = getenv(name);
  if (!s) return CCACHE_OK;
  if (strcmp(s, "unbounded") == 0 || strcmp(s, "infinity") == 0) {
    *v = CCACHE_UNBOUNDED;
    return CCACHE_OK;
  }
  if (!*s) return CCACHE_EINVAL;
  uint64_t n = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return CCACHE_EINVAL;
    unsigned d = (unsigned)(*p - '0');
    if (n > (UINT64_MAX - 1 - d) / 10) return CCACHE_EINVAL; /* would reach UINT64_MAX */
    n = n * 10 + d;
  }
  if (n == 0) return CCACHE_EINVAL;
  *v = n;
  return CCACHE_OK;
}

int ccache_default_init(const ccache_config *cfg) {
  if (!cfg || cfg->size < sizeof(ccache_config) || !cfg->alloc != !cfg->free ||
      cfg->max_items == 0 || cfg->ttl_ms == 0 || cfg->max_cost_bytes == 0)
    return CCACHE_EINVAL;
  int rc = CCACHE_OK;
  ccache__lock(&default_mu);
  if (atomic_load(&default_cache)) {
    rc = CCACHE_EBUSY;
  } else {
    memcpy(&default_cfg, cfg, sizeof default_cfg);
    default_cfg.size = sizeof default_cfg;
    default_cfg_set = 1;
  }
  ccache__unlock(&default_mu);
  return rc;
}

/* In a fork child, forget the parent's default instance (it refuses every
 * call there) so the child's first ccache_default() makes its own.  Another
 * parent thread may have held the mutex at fork(); the child has only this
 * thread, so it starts from a fresh one. */
static void after_fork_child(void) {
  (void)ccache__mutex_init(&default_mu);
  atomic_store(&default_cache, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) {
  int err = pthread_atfork(NULL, NULL, after_fork_child);
  if (err) ccache__panic("pthread_atfork", err);
}

static int create_default(ccache **out) {
  ccache_config cfg;
  if (default_cfg_set)
    cfg = default_cfg;
  else
    ccache_config_init(&cfg);
  int rc = parse_bound("CLOSURE_CACHE_MAX_ITEMS", &cfg.max_items);
  if (rc == CCACHE_OK) rc = parse_bound("CLOSURE_CACHE_TTL_MS", &cfg.ttl_ms);
  if (rc == CCACHE_OK) rc = parse_bound("CLOSURE_CACHE_MAX_COST", &cfg.max_cost_bytes);
  if (rc == CCACHE_OK) rc = ccache_open(&cfg, out);
  if (rc == CCACHE_OK) (*out)->is_default = 1;
  return rc;
}

int ccache_default(ccache **out) {
  if (!out) return CCACHE_EINVAL;
  ccache *c = atomic_load_explicit(&default_cache, memory_order_acquire);
  if (c) {
    *out = c;
    return CCACHE_OK;
  }
  int err = pthread_once(&atfork_once, register_atfork);
  if (err) ccache__panic("pthread_once", err);
  ccache__lock(&default_mu);
  c = atomic_load(&default_cache);
  int rc = CCACHE_OK;
  if (!c) {
    rc = create_default(&c);
    if (rc == CCACHE_OK) atomic_store_explicit(&default_cache, c, memory_order_release);
  }
  ccache__unlock(&default_mu);
  if (rc == CCACHE_OK) *out = c;
  return rc;
}
