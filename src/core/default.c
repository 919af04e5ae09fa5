/*
 * default.c - the process-wide default instance, created on first use.
 *
 * Its bounds may come from the environment.  The variables are deliberately
 * not CCACHE_*: the ccache compiler cache reads every CCACHE_* variable and
 * rejects the ones it does not know, which would break users' builds.
 */
#define _GNU_SOURCE 1 /* secure_getenv */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "tier/tier.h"
#include "tier/tier_trust.h"

static ccache__mutex default_mu = {.posix = PTHREAD_MUTEX_INITIALIZER};
static _Atomic(ccache *) default_cache;
static ccache_config default_cfg;
static int default_cfg_set;
/* What default_cfg's tier pointers point to: ccache_default_init() copies
 * the caller's codec, tag and tier array, and owns the tiers until the
 * default instance takes them. */
static ccache_codec default_codec;
static char *default_tag;
static ccache_tier *default_tiers[CCACHE_MAX_TIERS];

/* Accepted: a decimal integer >= 1 with no sign, space or suffix, below
 * UINT64_MAX; or "unbounded" / "infinity".  Unset keeps *v.  A refusal names
 * the variable and its value in ccache_error_detail(): the library prints
 * nothing itself. */
static int refuse(const char *name, const char *value) {
  ccache__detail(
      "%s=\"%.200s\": not a decimal integer from 1 to 2^64 - 2, \"unbounded\" or "
      "\"infinity\"",
      name, value);
  return CCACHE_EINVAL;
}

static int parse_bound(const char *name, uint64_t *v) {
  const char *s = secure_getenv(name);
  if (!s) return CCACHE_OK;
  if (strcmp(s, "unbounded") == 0 || strcmp(s, "infinity") == 0) {
    *v = CCACHE_UNBOUNDED;
    return CCACHE_OK;
  }
  if (!*s) return refuse(name, s);
  uint64_t n = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return refuse(name, s);
    unsigned d = (unsigned)(*p - '0');
    if (n > (UINT64_MAX - 1 - d) / 10) return refuse(name, s); /* would reach UINT64_MAX */
    n = n * 10 + d;
  }
  if (n == 0) return refuse(name, s);
  *v = n;
  return CCACHE_OK;
}

/* Copy cfg into default_cfg with deep copies of its tier fields; tiers of a
 * replaced configuration that the new one does not list are freed.
 * default_mu held. */
static int keep_config(const ccache_config *cfg) {
  /* A caller's struct may end before the fields added since (its size says
   * where): those keep their defaults. */
  ccache_config k;
  ccache_config_init(&k);
  memcpy(&k, cfg, cfg->size < sizeof k ? cfg->size : sizeof k);
  k.size = sizeof k;
  char *tag = NULL;
  if (k.runtime_tag && !(tag = strdup(k.runtime_tag))) return CCACHE_ENOMEM;
  for (unsigned i = 0; default_cfg_set && i < default_cfg.n_tiers; i++) {
    bool again = false;
    for (unsigned j = 0; j < k.n_tiers; j++) again = again || k.tiers[j] == default_tiers[i];
    if (!again) ccache_tier_free(default_tiers[i]);
  }
  for (unsigned j = 0; j < k.n_tiers; j++) default_tiers[j] = k.tiers[j];
  k.tiers = k.n_tiers ? default_tiers : NULL;
  if (k.codec) {
    default_codec = *k.codec;
    k.codec = &default_codec;
  }
  free(default_tag);
  default_tag = tag;
  k.runtime_tag = tag;
  default_cfg = k;
  default_cfg_set = 1;
  return CCACHE_OK;
}

int ccache_default_init(const ccache_config *cfg) {
  if (!cfg) {
    ccache__detail("ccache_default_init: cfg is NULL");
    return CCACHE_EINVAL;
  }
  if (!ccache__config_valid(cfg)) return CCACHE_EINVAL;
  int rc = CCACHE_OK;
  ccache__lock(&default_mu);
  if (atomic_load(&default_cache))
    rc = CCACHE_EBUSY;
  else
    rc = keep_config(cfg);
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

/* A detail naming the variable, keeping the call's own detail. */
static int env_fail(const char *name, const char *value, int rc) {
  char why[256]; /* the detail buffer is the one being rewritten */
  snprintf(why, sizeof why, "%s", ccache_error_detail());
  ccache__detail("%s=%.200s: %s", name, value, why);
  return rc;
}

/* CLOSURE_CACHE_SIGNING_KEY_FILE and CLOSURE_CACHE_TRUSTED_KEYS (key files,
 * comma-separated): a trust object in *made (freed by the caller; the cache
 * keeps its own copy) that extends the config's: the program's trusted keys
 * stay and the variable's are added; the variable's signing key replaces
 * the program's (whose public half stays trusted, as in a rotation).
 * Neither set: *made NULL and the config's object is used as it is. */
static int env_trust(ccache_config *cfg, ccache_trust **made) {
  const char *sk = secure_getenv("CLOSURE_CACHE_SIGNING_KEY_FILE");
  const char *tk = secure_getenv("CLOSURE_CACHE_TRUSTED_KEYS");
  *made = NULL;
  if ((!sk || !*sk) && (!tk || !*tk)) return CCACHE_OK;
  ccache_trust *t = NULL;
  int rc = cfg->trust ? ccache__trust_clone(&t, cfg->trust, !(sk && *sk)) : ccache_trust_new(&t);
  if (rc == CCACHE_OK && sk && *sk) {
    rc = ccache_trust_set_signing_key_file(t, sk);
    if (rc != CCACHE_OK) rc = env_fail("CLOSURE_CACHE_SIGNING_KEY_FILE", sk, rc);
  }
  for (const char *p = tk; rc == CCACHE_OK && p && *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    char path[4096];
    if (n == 0 || n >= sizeof path) {
      ccache__detail("CLOSURE_CACHE_TRUSTED_KEYS=%.200s: an empty or over-long file name", tk);
      rc = CCACHE_EINVAL;
      break;
    }
    memcpy(path, p, n);
    path[n] = '\0';
    rc = ccache_trust_add_key_file(t, path);
    if (rc != CCACHE_OK) rc = env_fail("CLOSURE_CACHE_TRUSTED_KEYS", tk, rc);
    p = comma ? comma + 1 : p + n;
  }
  if (rc != CCACHE_OK) {
    ccache_trust_free(t);
    return rc;
  }
  cfg->trust = t;
  *made = t;
  return CCACHE_OK;
}

/* CLOSURE_CACHE_REDIS_PASSWORD_FILE: the password, the file's first line
 * (a trailing newline dropped), from a file only its owner may read. */
static int read_password(const char *path, char *out, size_t cap) {
  static const char *const name = "CLOSURE_CACHE_REDIS_PASSWORD_FILE";
  FILE *f = fopen(path, "re");
  if (!f) {
    ccache__detail("%s=%.200s: %s", name, path, strerror(errno));
    return CCACHE_EIO;
  }
  struct stat st;
  int rc = CCACHE_OK;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
    ccache__detail("%s=%.200s: not a regular file readable by its owner only (chmod 600)", name,
                   path);
    rc = CCACHE_EPERM;
  } else if (!fgets(out, (int)cap, f) || !*out) {
    ccache__detail("%s=%.200s: empty", name, path);
    rc = CCACHE_EINVAL;
  } else {
    out[strcspn(out, "\n")] = '\0';
  }
  fclose(f);
  return rc;
}

/* CLOSURE_CACHE_REDIS=host:port[,...]: a Redis tier below the configured
 * ones (default options otherwise), only when a codec was supplied (without
 * one tiers are never used).  *made is the new tier, freed by the caller
 * unless the cache took it. */
static int env_redis_tier(ccache_config *cfg, ccache_tier **tiers, ccache_tier **made) {
  const char *servers = secure_getenv("CLOSURE_CACHE_REDIS");
  *made = NULL;
  if (!servers || !*servers || !cfg->codec) return CCACHE_OK;
  if (cfg->n_tiers >= CCACHE_MAX_TIERS) {
    ccache__detail("CLOSURE_CACHE_REDIS: already %u tiers", (unsigned)cfg->n_tiers);
    return CCACHE_EINVAL;
  }
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = servers;
  const char *user = secure_getenv("CLOSURE_CACHE_REDIS_USER");
  const char *pwfile = secure_getenv("CLOSURE_CACHE_REDIS_PASSWORD_FILE");
  char password[1024] = "";
  if (user && *user) o.user = user;
  if (pwfile && *pwfile) {
    int prc = read_password(pwfile, password, sizeof password);
    if (prc != CCACHE_OK) return prc;
    o.password = password;
  }
  int rc = ccache_tier_redis(&o, made);
  explicit_bzero(password, sizeof password); /* the tier keeps its own copy */
  if (rc != CCACHE_OK) {
    char why[256]; /* the detail buffer is the one being rewritten */
    snprintf(why, sizeof why, "%s", ccache_error_detail());
    ccache__detail("CLOSURE_CACHE_REDIS=%s: %s", servers, why);
    return rc;
  }
  for (uint32_t i = 0; i < cfg->n_tiers; i++) tiers[i] = cfg->tiers[i];
  tiers[cfg->n_tiers] = *made;
  cfg->tiers = tiers;
  cfg->n_tiers++;
  return CCACHE_OK;
}

/* CLOSURE_CACHE_TRUST=unsigned: CCACHE_TRUST_UNSIGNED (accept unsigned
 * entries from shared tiers); unset or empty keeps the config's flags. */
static int env_trust_flags(ccache_config *cfg) {
  const char *v = secure_getenv("CLOSURE_CACHE_TRUST");
  if (!v || !*v) return CCACHE_OK;
  if (strcmp(v, "unsigned") != 0) {
    ccache__detail("CLOSURE_CACHE_TRUST=%.200s: the one value is \"unsigned\"", v);
    return CCACHE_EINVAL;
  }
  cfg->trust_flags |= CCACHE_TRUST_UNSIGNED;
  return CCACHE_OK;
}

/* Safe by default: the Redis tier CLOSURE_CACHE_REDIS added, with neither
 * keys nor CLOSURE_CACHE_TRUST=unsigned (nor the config's flag), is kept in
 * the cache but disabled, its health saying why; never used unsigned. */
static void env_redis_guard(const ccache_config *cfg, ccache_tier *redis) {
  if (!redis || cfg->trust || (cfg->trust_flags & CCACHE_TRUST_UNSIGNED)) return;
  redis->kept_disabled =
      "CLOSURE_CACHE_REDIS is not used: no trusted keys (set CLOSURE_CACHE_TRUSTED_KEYS, or "
      "CLOSURE_CACHE_TRUST=unsigned to load unsigned entries)";
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
  ccache_tier *tiers[CCACHE_MAX_TIERS], *redis = NULL;
  ccache_trust *trust = NULL;
  int rc = parse_bound("CLOSURE_CACHE_MAX_ITEMS", &cfg.max_items);
  if (rc == CCACHE_OK) rc = parse_bound("CLOSURE_CACHE_TTL_MS", &cfg.ttl_ms);
  if (rc == CCACHE_OK) rc = parse_bound("CLOSURE_CACHE_MAX_COST", &cfg.max_cost_bytes);
  if (rc == CCACHE_OK) rc = env_trust(&cfg, &trust);
  if (rc == CCACHE_OK) rc = env_trust_flags(&cfg);
  if (rc == CCACHE_OK) rc = env_redis_tier(&cfg, tiers, &redis);
  if (rc == CCACHE_OK) env_redis_guard(&cfg, redis);
  if (rc == CCACHE_OK) rc = ccache_open(&cfg, out);
  if (rc == CCACHE_OK) (*out)->is_default = 1;
  if (rc != CCACHE_OK) ccache_tier_free(redis); /* the configured tiers stay default_cfg's */
  ccache_trust_free(trust);                     /* the cache has its own copy */
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
