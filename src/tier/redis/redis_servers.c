/*
 * redis_servers.c - the Redis tier's server list: parsing and rendezvous
 * (highest-random-weight) hashing.
 *
 * Every key goes to the server with the largest XXH3-64(key, server seed),
 * where a server's seed is the hash of its canonical name.  The choice
 * depends only on the key and the set of names, not on the order of the
 * list, so processes given the same servers in any order agree; removing a
 * server moves only the keys it held.  The same weights, sorted, give each
 * key its whole rendezvous order: the server a key falls back to when its
 * first is down is the one it would map to if the first were removed, so
 * processes that agree which servers are down agree where the key lives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <xxhash.h>

#include "tier/redis/redis.h"

#define UNIX_PATH_MAX 107 /* sun_path is 108 bytes with the terminator */

static char *dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Decimal 1..65535, the whole range [s, s+n). */
static int parse_port(const char *s, size_t n, int *port) {
  if (n == 0 || n > 5) return -1;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < 1 || v > 65535) return -1;
  *port = v;
  return 0;
}

/* One item [s, s+n) into *sv.  Returns OK, EINVAL (why set) or ENOMEM. */
static int parse_item(const char *s, size_t n, ccache__rserver *sv, char *why, size_t why_len) {
  if (n == 0) {
    snprintf(why, why_len, "empty server entry");
    return CCACHE_EINVAL;
  }
  if (n > 5 && memcmp(s, "unix:", 5) == 0) {
    const char *path = s + 5;
    size_t plen = n - 5;
    if (path[0] != '/' || plen > UNIX_PATH_MAX) {
      snprintf(why, why_len, "'%.*s': want unix:/absolute/path (at most %d bytes)", (int)n, s,
               UNIX_PATH_MAX);
      return CCACHE_EINVAL;
    }
    sv->path = dup_range(path, plen);
    sv->name = dup_range(s, n);
    return sv->path && sv->name ? CCACHE_OK : CCACHE_ENOMEM;
  }
  const char *host = s, *colon;
  size_t hlen;
  if (s[0] == '[') { /* [v6]:port */
    const char *close = memchr(s, ']', n);
    if (!close || close == s + 1 || close + 1 >= s + n || close[1] != ':') goto bad;
    host = s + 1;
    hlen = (size_t)(close - host);
    colon = close + 1;
  } else {
    colon = memchr(s, ':', n);
    if (!colon || memchr(colon + 1, ':', (size_t)(s + n - colon - 1))) goto bad;
    hlen = (size_t)(colon - s);
    if (hlen == 0) goto bad;
  }
  if (parse_port(colon + 1, (size_t)(s + n - colon - 1), &sv->port) != 0) goto bad;
  sv->host = dup_range(host, hlen);
  sv->name = dup_range(s, n);
  return sv->host && sv->name ? CCACHE_OK : CCACHE_ENOMEM;
bad:
  snprintf(why, why_len, "'%.*s': want host:port (port 1..65535), [ipv6]:port or unix:/path",
           (int)n, s);
  return CCACHE_EINVAL;
}

int ccache__rservers_parse(const char *list, ccache__rserver **out, size_t *n, char *why,
                           size_t why_len) {
  if (!list || !*list) {
    snprintf(why, why_len, "empty server list");
    return CCACHE_EINVAL;
  }
  size_t count = 1;
  for (const char *p = list; *p; p++) count += *p == ',';
  if (count > CCACHE__REDIS_MAX_SERVERS) {
    snprintf(why, why_len, "%zu servers: at most %d", count, CCACHE__REDIS_MAX_SERVERS);
    return CCACHE_EINVAL;
  }
  ccache__rserver *s = calloc(count, sizeof *s);
  if (!s) return CCACHE_ENOMEM;
  size_t made = 0;
  int rc = CCACHE_OK;
  const char *p = list;
  for (size_t i = 0; i < count && rc == CCACHE_OK; i++) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    rc = parse_item(p, len, &s[i], why, why_len);
    made = i + 1;
    if (rc == CCACHE_OK) {
      s[i].seed = XXH3_64bits(s[i].name, strlen(s[i].name));
      for (size_t j = 0; j < i; j++)
        if (strcmp(s[j].name, s[i].name) == 0) {
          snprintf(why, why_len, "'%s' is listed twice", s[i].name);
          rc = CCACHE_EINVAL;
        }
    }
    p = end ? end + 1 : p + len;
  }
  for (size_t i = 0; i < count && rc == CCACHE_OK; i++) {
    rc = ccache__mutex_init(&s[i].server_mu);
    if (rc != CCACHE_OK) break;
    rc = ccache__mutex_init(&s[i].renew_mu);
    if (rc != CCACHE_OK) {
      ccache__mutex_destroy(&s[i].server_mu);
      break;
    }
    s[i].locks_made = true;
  }
  if (rc != CCACHE_OK) {
    ccache__rservers_free(s, made);
    return rc;
  }
  *out = s;
  *n = count;
  return CCACHE_OK;
}

static uint64_t weight(const ccache__rserver *sv, ccache_key pkey) {
  unsigned char kb[16];
  for (int i = 0; i < 8; i++) {
    kb[i] = (unsigned char)(pkey.lo >> (8 * i));
    kb[8 + i] = (unsigned char)(pkey.hi >> (8 * i));
  }
  return XXH3_64bits_withSeed(kb, sizeof kb, sv->seed);
}

/* Whether server a (weight wa) comes before server b (weight wb). */
static int before(const ccache__rserver *s, size_t a, uint64_t wa, size_t b, uint64_t wb) {
  return wa > wb || (wa == wb && strcmp(s[a].name, s[b].name) < 0);
}

size_t ccache__rendezvous(const ccache__rserver *s, size_t n, ccache_key pkey) {
  size_t best = 0;
  uint64_t best_w = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t w = weight(&s[i], pkey);
    if (i == 0 || before(s, i, w, best, best_w)) {
      best = i;
      best_w = w;
    }
  }
  return best;
}

void ccache__rendezvous_order(const ccache__rserver *s, size_t n, ccache_key pkey, uint8_t *order) {
  uint64_t w[CCACHE__REDIS_MAX_SERVERS];
  for (size_t i = 0; i < n; i++) { /* insertion sort: n is small */
    uint64_t wi = weight(&s[i], pkey);
    size_t j = i;
    while (j > 0 && before(s, i, wi, order[j - 1], w[j - 1])) {
      order[j] = order[j - 1];
      w[j] = w[j - 1];
      j--;
    }
    order[j] = (uint8_t)i;
    w[j] = wi;
  }
}

#define SENTINEL_NAME_MAX 128

int ccache__rservers_parse_sentinel(const char *spec, ccache__rserver **out, size_t *n,
                                    ccache__rserver **sentinels, size_t *n_sentinels, char *why,
                                    size_t why_len) {
  const char *body = spec + 9; /* past "sentinel:" */
  const char *slash = strchr(body, '/');
  if (!slash || slash == body || !slash[1] || strchr(slash + 1, '/')) {
    snprintf(why, why_len, "want sentinel:HOST:PORT[,HOST:PORT...]/NAME[,NAME...]");
    return CCACHE_EINVAL;
  }
  size_t slen = (size_t)(slash - body);
  char *list = malloc(slen + 1);
  if (!list) return CCACHE_ENOMEM;
  memcpy(list, body, slen);
  list[slen] = '\0';
  int rc = ccache__rservers_parse(list, sentinels, n_sentinels, why, why_len);
  free(list);
  if (rc != CCACHE_OK) return rc;
  const char *names = slash + 1;
  size_t count = 1;
  for (const char *q = names; *q; q++) count += *q == ',';
  rc = CCACHE_OK;
  if (count > CCACHE__REDIS_MAX_SERVERS) {
    snprintf(why, why_len, "%zu primary names: at most %d", count, CCACHE__REDIS_MAX_SERVERS);
    rc = CCACHE_EINVAL;
  }
  ccache__rserver *s = rc == CCACHE_OK ? calloc(count, sizeof *s) : NULL;
  if (rc == CCACHE_OK && !s) rc = CCACHE_ENOMEM;
  size_t made = 0;
  const char *q = names;
  for (size_t i = 0; i < count && rc == CCACHE_OK; i++) {
    const char *end = strchr(q, ',');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    made = i + 1;
    int bad = len == 0 || len > SENTINEL_NAME_MAX;
    for (size_t j = 0; j < len && !bad; j++) bad = q[j] <= ' ' || q[j] == 0x7f;
    if (bad) {
      snprintf(why, why_len, "primary name '%.*s': want 1..%d printable bytes, no spaces",
               (int)(len > 64 ? 64 : len), q, SENTINEL_NAME_MAX);
      rc = CCACHE_EINVAL;
      break;
    }
    s[i].name = dup_range(q, len);
    if (!s[i].name) {
      rc = CCACHE_ENOMEM;
      break;
    }
    s[i].sentinel = true;
    s[i].seed = XXH3_64bits(s[i].name, len);
    for (size_t j = 0; j < i; j++)
      if (strcmp(s[j].name, s[i].name) == 0) {
        snprintf(why, why_len, "primary '%s' is listed twice", s[i].name);
        rc = CCACHE_EINVAL;
      }
    q = end ? end + 1 : q + len;
  }
  for (size_t i = 0; i < count && rc == CCACHE_OK; i++) {
    rc = ccache__mutex_init(&s[i].server_mu);
    if (rc != CCACHE_OK) break;
    rc = ccache__mutex_init(&s[i].renew_mu);
    if (rc != CCACHE_OK) {
      ccache__mutex_destroy(&s[i].server_mu);
      break;
    }
    s[i].locks_made = true;
  }
  if (rc != CCACHE_OK) {
    ccache__rservers_free(s, made);
    ccache__rservers_free(*sentinels, *n_sentinels);
    *sentinels = NULL;
    *n_sentinels = 0;
    return rc;
  }
  *out = s;
  *n = count;
  return CCACHE_OK;
}

void ccache__rservers_free(ccache__rserver *s, size_t n) {
  if (!s) return;
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < s[i].n_idle; j++) redisFree(s[i].idle[j]);
    if (s[i].renew_ctx) redisFree(s[i].renew_ctx);
    free(s[i].name);
    free(s[i].host);
    free(s[i].path);
    if (s[i].locks_made) {
      ccache__mutex_destroy(&s[i].server_mu);
      ccache__mutex_destroy(&s[i].renew_mu);
    }
  }
  free(s);
}
