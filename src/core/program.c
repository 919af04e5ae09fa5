/*
 * program.c - the reference-counted program table, and get-or-compile at the
 * program level.
 *
 * Programs are interned under their structural key so many closure entries
 * share one native program (30 identical decoder layers -> one program per
 * shape).  Every holder counts in refs: caller handles and closure entries.
 * When refs reaches zero the program leaves the table under c->pmu and its
 * native program is destroyed after the lock is released, exactly once.
 */
#include "core/internal.h"
#include "tier/tier.h"

/* Look up under pmu; +1 handle on a hit.  The first c->klen bytes of
 * pkey are compared: all 256 bits in a strong cache. */
static ccache_program *find_locked(ccache *c, const ccache_strong_key *pkey) {
  ccache__assert_held(&c->pmu);
  ccache_program *p = NULL;
  HASH_FIND_BYHASHVALUE(hh, c->programs, pkey, c->klen, ccache__key_hash(pkey->key), p);
  if (p) {
    p->refs++;
    c->handles_out++;
  }
  return p;
}

void ccache__program_ref(ccache *c, ccache_program *p) {
  ccache__lock(&c->pmu);
  p->refs++;
  ccache__unlock(&c->pmu);
}

void ccache__program_unref(ccache *c, ccache_program *p, bool is_handle) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  ccache__lock(&c->pmu);
  ccache__assert(p->refs > 0);
  if (is_handle) c->handles_out--;
  bool last = --p->refs == 0;
  if (last) {
    HASH_DELETE(hh, c->programs, p);
    c->nprograms--;
  }
  ccache__unlock(&c->pmu);
  if (!last) return;
  ccache__assert(p->table_refs == 0);
  ccache__destroy_program(c, p->native);
  ccache__free(&c->mem, p);
}

/* Interning shared by ccache_program_intern and the program flights: takes
 * ownership of native; *out +1 handle. */
static int intern(ccache *c, const ccache_strong_key *pkey, void *native, uint64_t cost,
                  ccache_program **out, bool count_lookup, const char *api) {
  (void)api;
  CCACHE__UTHASH_SCOPE(&c->mem);
  /* Allocated before the lock so a new program costs no allocation under it
   * (uthash's own table growth may still allocate there). */
  ccache_program *fresh =
      ccache__calloc(&c->mem, sizeof *fresh + (c->strong ? sizeof(ccache_key) : 0));
  if (!fresh) {
    ccache__destroy_program(c, native);
    return CCACHE_ENOMEM;
  }
  ccache__lock(&c->pmu);
  ccache_program *p = find_locked(c, pkey);
  if (p) {
    if (count_lookup) c->program_hits++;
    ccache__unlock(&c->pmu);
    ccache__free(&c->mem, fresh);
    /* The cache owns native either way: a duplicate is destroyed now, unless
     * it is the very program already interned. */
    if (native != p->native) ccache__destroy_program(c, native);
    *out = p;
    return CCACHE_OK;
  }
  CCACHE__MISUSE(ccache__misuse_native_in(c, native, api));
  fresh->pkey = pkey->key;
  if (c->strong) fresh->pcheck[0] = pkey->check;
  fresh->native = native;
  fresh->cost = cost;
  fresh->refs = 1;
  fresh->owner = c;
  HASH_ADD_KEYPTR_BYHASHVALUE(hh, c->programs, &fresh->pkey, c->klen, ccache__key_hash(pkey->key),
                              fresh);
  if (uh_oom) {
    ccache__unlock(&c->pmu);
    ccache__free(&c->mem, fresh);
    ccache__destroy_program(c, native);
    return CCACHE_ENOMEM;
  }
  c->nprograms++;
  c->handles_out++;
  if (count_lookup) c->program_misses++;
  ccache__unlock(&c->pmu);
  *out = fresh;
  return CCACHE_OK;
}

/* The checked build registers every handle it hands out (misuse.h). */
static int handle_out(ccache *c, ccache_key pkey, ccache_program **out, int rc, const char *api) {
  if (rc == CCACHE_OK) CCACHE__MISUSE(ccache__misuse_handle_out(c, *out, pkey, api));
  (void)c;
  (void)pkey;
  (void)out;
  (void)api;
  return rc;
}

void ccache__abandon_programs(ccache *c) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  ccache_program *p, *tmp;
  HASH_ITER(hh, c->programs, p, tmp) {
    HASH_DELETE(hh, c->programs, p);
    c->nprograms--;
    ccache__destroy_program(c, p->native);
    ccache__free(&c->mem, p);
  }
  c->handles_out = 0;
}

static int intern_k(ccache *c, const ccache_strong_key *pkey, bool strong, void *native,
                    uint64_t cost_bytes, ccache_program **out, const char *api) {
  if (!c) return CCACHE_EINVAL;
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  int gate = out && pkey && ccache__mode_ok(c, strong) ? ccache__gate(c) : CCACHE_EINVAL;
  if (gate != CCACHE_OK) {
    /* Ownership of native passes to the cache on error too. */
    ccache__destroy_program(c, native);
    return gate;
  }
  *out = NULL;
  return handle_out(c, pkey->key, out, intern(c, pkey, native, cost_bytes, out, true, api), api);
}

int ccache_program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost_bytes,
                          ccache_program **out) {
  ccache_strong_key k = ccache__fast_key(pkey);
  return intern_k(c, &k, false, native, cost_bytes, out, __func__);
}

int ccache_program_intern_strong(ccache *c, const ccache_strong_key *pkey, void *native,
                                 uint64_t cost_bytes, ccache_program **out) {
  return intern_k(c, pkey, true, native, cost_bytes, out, __func__);
}

static int fetch_k(ccache *c, const ccache_strong_key *pkey, bool strong, ccache_program **out,
                   const char *api) {
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  (void)api;
  if (!c || !out) return CCACHE_EINVAL;
  *out = NULL;
  if (!pkey || !ccache__mode_ok(c, strong)) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  ccache__lock(&c->pmu);
  ccache_program *p = find_locked(c, pkey);
  if (p)
    c->program_hits++;
  else
    c->program_misses++;
  ccache__unlock(&c->pmu);
  *out = p;
  return handle_out(c, pkey->key, out, p ? CCACHE_OK : CCACHE_MISS, api);
}

int ccache_program_fetch(ccache *c, ccache_key pkey, ccache_program **out) {
  ccache_strong_key k = ccache__fast_key(pkey);
  return fetch_k(c, &k, false, out, __func__);
}

int ccache_program_fetch_strong(ccache *c, const ccache_strong_key *pkey, ccache_program **out) {
  return fetch_k(c, pkey, true, out, __func__);
}

void *ccache_program_native(const ccache_program *p) { return p ? p->native : NULL; }

void ccache_program_release(ccache *c, ccache_program *p) {
  CCACHE__CHECK_CACHE(c);
  if (!c || !p || ccache__forked(c)) return;
  CCACHE__MISUSE(ccache__misuse_handle_back(c, p, __func__));
  ccache__program_unref(c, p, true);
}

/* ------------------------------------------------------- get-or-compile */

#define API "ccache_program_get_or_compile"

static int join_flight(ccache *c, ccache__flight *f, ccache_program **out) {
  int rc = ccache__flight_wait_locked(&c->pflights, f, &c->program_waits);
  if (rc == CCACHE_OK)
    *out = f->program; /* the handle was taken for us before we woke */
  else
    ccache__flight_take_detail(f);
  c->program_misses++; /* it missed: waiting is not a hit */
  ccache__flight_leave_locked(&c->pflights, f);
  ccache__unlock(&c->pmu);
  return rc;
}

/* The user's compile as the tier stack runs it (only when no tier has the
 * program): its own time, events and status (flight.c's ccache__run), under
 * a callback frame keyed by the cache (ccache_close() from inside it is
 * refused). */
typedef struct user_compile {
  ccache *c;
  ccache_key pkey;
  ccache_program_compile_fn fn;
  void *ud;
  uint64_t wall_ns;
  int status;
  bool ran;
} user_compile;

static int call_compile(void *arg, void **native_out, uint64_t *cost_out, uint64_t *took_ns) {
  user_compile *u = arg;
  ccache__run run;
  ccache__run_begin(u->c, &run, CCACHE_LEVEL_PROGRAM, u->pkey);
  int crc;
  CCACHE__USER_CALL(u->c, &u->wall_ns, crc = u->fn(u->ud, u->c, u->pkey, native_out, cost_out));
  *took_ns = u->wall_ns;
  atomic_fetch_add_explicit(&u->c->program_compile_ns, ccache__run_end(&run, u->wall_ns),
                            memory_order_relaxed);
  u->status = ccache__run_status(&run, crc, API, u->pkey);
  u->ran = true;
  return crc;
}

/* The owner: with no lock held, a native program from the tiers (tier_stack.c),
 * which run the compile only when none of them has it; intern it, hand one
 * handle to each waiter, wake them. */
static int run_compile(ccache *c, ccache__flight *f, ccache_program_compile_fn compile, void *ud,
                       ccache_program **out, const char *api) {
  void *native = NULL;
  uint64_t cost = 0, took_ns = 0;
  bool compiled = false;
  user_compile u = {c, f->key.key, compile, ud, 0, CCACHE_OK, false};
  int crc =
      ccache__tier_obtain(c->tiers, &f->key, call_compile, &u, &native, &cost, &compiled, &took_ns);
  (void)took_ns; /* the tiers' own threshold; compile time is counted in call_compile */
  ccache_program *p = NULL;
  int rc = crc != 0 ? (u.ran ? u.status : CCACHE_ECOMPILE)
                    : intern(c, &f->key, native, cost, &p, false, api);
  if (crc != 0) atomic_fetch_add(&c->program_compile_failures, 1);
  if (crc == 0 && rc != CCACHE_OK) {
    char hex[CCACHE_KEY_HEX_LEN];
    ccache__detail_for(rc, "%s: out of memory interning the program for key %s", api,
                       ccache_key_hex(f->key.key, hex));
  }

  ccache__lock(&c->pmu);
  if (compiled) c->program_compiles++; /* a tier hit is not a compile */
  if (rc == CCACHE_OK) {               /* one handle per waiter, before anyone wakes */
    p->refs += f->waiters;
    c->handles_out += f->waiters;
  } else {
    ccache__flight_keep_detail(&c->mem, f);
  }
  f->program = p;
  ccache_key key = f->key.key;
  bool free_f = ccache__flight_publish_locked(&c->pflights, f, rc);
  atomic_fetch_sub(&c->inflight, 1);
  ccache__unlock(&c->pmu);
  if (free_f) ccache__flight_free(&c->mem, f);
  if (u.ran && c->on_event)
    ccache__event_compile(c, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_PROGRAM, key, rc, u.wall_ns);
  *out = p;
  return rc;
}

static int get_or_compile(ccache *c, const ccache_strong_key *pkey,
                          ccache_program_compile_fn compile, void *ud, ccache_program **out,
                          const char *api) {
  ccache__lock(&c->pmu);
  ccache_program *p = find_locked(c, pkey);
  if (p) {
    c->program_hits++;
    ccache__unlock(&c->pmu);
    *out = p;
    return CCACHE_OK;
  }
  /* Inside another compile, this call's time is not that compile's. */
  uint64_t nested = ccache__nested_start();
  ccache__flight *f = ccache__flight_find_locked(&c->pflights, pkey);
  int rc = CCACHE_EDEADLK;
  if (f && !ccache__flight_mine(f)) {
    rc = join_flight(c, f, out); /* unlocks */
  } else {
    if (!f) {
      f = ccache__flight_start_locked(&c->pflights, pkey);
      rc = f ? CCACHE_OK : CCACHE_ENOMEM;
    }
    c->program_misses++;
    if (rc == CCACHE_OK) atomic_fetch_add(&c->inflight, 1);
    ccache__unlock(&c->pmu);
    if (rc == CCACHE_OK) rc = run_compile(c, f, compile, ud, out, api);
  }
  ccache__nested_end(nested);
  return rc;
}

static int goc_k(ccache *c, const ccache_strong_key *pkey, bool strong,
                 ccache_program_compile_fn compile, void *ud, ccache_program **out,
                 const char *api) {
  if (out) *out = NULL;
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  if (!c || !compile || !out || !pkey || !ccache__mode_ok(c, strong)) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  uint64_t seq0 = ccache__detail_seq();
  int rc = get_or_compile(c, pkey, compile, ud, out, api);
  return handle_out(c, pkey->key, out, ccache__goc_finish(rc, seq0, api, pkey->key), api);
}

int ccache_program_get_or_compile(ccache *c, ccache_key pkey, ccache_program_compile_fn compile,
                                  void *ud, ccache_program **out) {
  ccache_strong_key k = ccache__fast_key(pkey);
  return goc_k(c, &k, false, compile, ud, out, __func__);
}

int ccache_program_get_or_compile_strong(ccache *c, const ccache_strong_key *pkey,
                                         ccache_program_compile_fn compile, void *ud,
                                         ccache_program **out) {
  return goc_k(c, pkey, true, compile, ud, out, __func__);
}
