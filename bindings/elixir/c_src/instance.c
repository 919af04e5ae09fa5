/* Named caches: open, close, and the two counts that let a cache be closed
 * while other threads may still reach it.
 *
 * A lookup is lock-free (a scan of the registry), so a thread may hold an
 * instance pointer while the cache is being closed: instance structs are
 * never freed (about 1.3 KiB stays allocated per closed cache), and
 *  - every NIF call that enters the C cache does so between ccn_enter() and
 *    ccn_leave(): a count on its thread slot's line, then a check of
 *    `closed`.  ccn_nif_close() sets `closed`, then waits until every
 *    slot's count is 0: after that no call is inside the C cache or can
 *    enter it (seq_cst on both sides: the store-then-load pattern);
 *  - `holds` counts what may still call into the C cache later: the
 *    registry (until close), every value (its dtor may release a program
 *    handle), every interned program term, every loan of ccache_nif.h.
 *    The last release closes the C cache, outside any ccache call. */
#include <sched.h>
#include <string.h>
#include "nif.h"

ccn_instance *ccn_lookup(ErlNifEnv *env, ERL_NIF_TERM name) {
  ccn_registry *reg = ccn_registry_in_use(env);
  int n = atomic_load_explicit(&reg->count, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    ccn_instance *inst = atomic_load_explicit(&reg->slots[i], memory_order_acquire);
    if (inst != NULL && inst->name == name) return inst;
  }
  return NULL;
}

ccn_instance *ccn_enter(ErlNifEnv *env, ERL_NIF_TERM name) {
  ccn_instance *inst = ccn_lookup(env, name);
  if (inst == NULL) return NULL;
  atomic_fetch_add(&inst->per_slot[ccn_thread_slot()].active, 1);
  if (atomic_load(&inst->closed)) {
    ccn_leave(inst);
    return NULL;
  }
  return inst;
}

void ccn_leave(ccn_instance *inst) {
  atomic_fetch_sub(&inst->per_slot[ccn_thread_slot()].active, 1);
}

void ccn_hold(ccn_instance *inst) { atomic_fetch_add(&inst->holds, 1); }

/* The last holder: nothing can call into the C cache any more. */
void ccn_unhold(ccn_instance *inst) {
  if (atomic_fetch_sub(&inst->holds, 1) != 1) return;
  ccache_program_release(inst->c, inst->term_prog);
  inst->term_prog = NULL;
  if (ccache_close(inst->c) == CCACHE_OK) inst->c = NULL; /* else left open: never used again */
}

ERL_NIF_TERM ccn_no_cache(ErlNifEnv *env, ERL_NIF_TERM name) {
  if (!enif_is_atom(env, name)) return enif_make_badarg(env);
  return enif_make_tuple2(env, ccn_atom_error, ccn_atom_no_cache);
}

/* :infinity or a positive integer -> a ccache bound */
int ccn_get_bound(ErlNifEnv *env, ERL_NIF_TERM t, uint64_t *out) {
  ErlNifUInt64 v;
  if (t == ccn_atom_infinity) {
    *out = CCACHE_UNBOUNDED;
    return 1;
  }
  if (!enif_get_uint64(env, t, &v) || v == 0 || v >= CCACHE_UNBOUNDED) return 0;
  *out = v;
  return 1;
}

static uint64_t manual_clock(void *ctx) {
  return atomic_load_explicit(&((ccn_instance *)ctx)->now_ms, memory_order_relaxed);
}

/* A new instance with its C cache open, or NULL with *rc set. */
static ccn_instance *instance_new(ERL_NIF_TERM name, uint64_t max_items, uint64_t ttl,
                                  uint64_t inline_max, int manual, int strong, int *rc) {
  ccn_instance *inst = enif_alloc(sizeof *inst);
  *rc = CCACHE_ENOMEM;
  if (inst == NULL) return NULL;
  memset(inst, 0, sizeof *inst);
  inst->name = name;
  inst->inline_max = inline_max;
  inst->manual_clock = manual;
  inst->strong = strong;
  atomic_init(&inst->holds, 1); /* the registry's */
  inst->flight_lock = enif_mutex_create("ccache_flights");
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.max_items = max_items;
  cfg.ttl_ms = ttl;
  cfg.destroy_closure = ccn_destroy_closure;
  cfg.destroy_program = ccn_destroy_program;
  cfg.ctx = inst;
  cfg.key_mode = strong ? CCACHE_KEYS_STRONG : CCACHE_KEYS_FAST;
  if (manual) {
    cfg.clock_ms = manual_clock;
    cfg.sweeper_thread = 0; /* expiry then happens at lookups, judged on the manual clock */
  }
  if (inst->flight_lock != NULL) *rc = ccache_open(&cfg, &inst->c);
  if (*rc == CCACHE_OK) {
    ccn_key pkey;
    ccn_program_key(inst, "ccache-elixir: term values", 0, &pkey);
    *rc = ccn_program_intern(inst, &pkey, NULL, 0, &inst->term_prog);
    if (*rc != CCACHE_OK) ccache_close(inst->c);
  }
  if (*rc == CCACHE_OK) return inst;
  if (inst->flight_lock != NULL) enif_mutex_destroy(inst->flight_lock);
  enif_free(inst);
  return NULL;
}

/* open(name, max_items, ttl, inline_max, manual_clock, :fast | :strong) ->
 *   {:created | :attached, name}, or {:error, _}.  An open cache of that
 * name is attached to as it is (entries kept); its bounds are set to the
 * ones given; its key mode must be the one given ({:error,
 * :other_key_mode}).  A closed cache's name makes a new, empty cache.
 * Strong keys need the strong fingerprint (libsodium): without it the
 * open fails with the library's CCACHE_ENOTSUP. */
ERL_NIF_TERM ccn_nif_open(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  uint64_t max_items, ttl, inline_max;
  if (!enif_is_atom(env, argv[0]) || !ccn_get_bound(env, argv[1], &max_items) ||
      !ccn_get_bound(env, argv[2], &ttl) || !ccn_get_bound(env, argv[3], &inline_max) ||
      (argv[4] != ccn_atom_true && argv[4] != ccn_atom_false) || !enif_is_atom(env, argv[5])) {
    return enif_make_badarg(env);
  }
  int strong = enif_is_identical(argv[5], enif_make_atom(env, "strong"));
  if (!strong && !enif_is_identical(argv[5], enif_make_atom(env, "fast"))) {
    return enif_make_badarg(env);
  }
  int hash_rc = strong ? ccn_strong_available() : CCACHE_OK;
  if (hash_rc != CCACHE_OK) return ccn_error_status(env, hash_rc);
  ccn_registry *reg = ccn_registry_in_use(env);
  enif_mutex_lock(reg->lock);
  ccn_instance *inst = ccn_lookup(env, argv[0]);
  if (inst != NULL) {
    /* Under the registry lock, which a close takes too: not closed. */
    if (inst->strong != strong) {
      enif_mutex_unlock(reg->lock);
      return enif_make_tuple2(env, ccn_atom_error, enif_make_atom(env, "other_key_mode"));
    }
    int rc = ccache_set_limits(inst->c, max_items, ttl, CCACHE_UNBOUNDED);
    if (rc == CCACHE_OK) inst->inline_max = inline_max;
    enif_mutex_unlock(reg->lock);
    if (rc != CCACHE_OK) return ccn_error_status(env, rc);
    return enif_make_tuple2(env, enif_make_atom(env, "attached"), argv[0]);
  }
  int n = atomic_load_explicit(&reg->count, memory_order_relaxed), slot = n;
  for (int i = 0; i < n && slot == n; i++) {
    if (atomic_load_explicit(&reg->slots[i], memory_order_relaxed) == NULL) slot = i;
  }
  if (slot == CCN_MAX_INSTANCES) {
    enif_mutex_unlock(reg->lock);
    return enif_make_tuple2(env, ccn_atom_error, enif_make_atom(env, "too_many_caches"));
  }
  int rc;
  inst = instance_new(argv[0], max_items, ttl, inline_max, argv[4] == ccn_atom_true, strong, &rc);
  if (inst == NULL) {
    enif_mutex_unlock(reg->lock);
    return ccn_error_status(env, rc);
  }
  atomic_store_explicit(&reg->slots[slot], inst, memory_order_release);
  if (slot == n) atomic_store_explicit(&reg->count, n + 1, memory_order_release);
  enif_mutex_unlock(reg->lock);
  return enif_make_tuple2(env, enif_make_atom(env, "created"), argv[0]);
}

/* close(name) -> :ok | {:error, :no_cache}.  Dirty (the clear runs destroy
 * callbacks for every entry).  The name is free at once; the entries
 * leave now; references to values stay valid, and the C cache closes when
 * the last of them (and of the program terms and loans) is gone.  Every
 * get_or_compile waiting on a flight of this cache gets {:error,
 * :no_cache}. */
ERL_NIF_TERM ccn_nif_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_registry *reg = ccn_registry_in_use(env);
  enif_mutex_lock(reg->lock);
  ccn_instance *inst = ccn_lookup(env, argv[0]);
  if (inst == NULL) {
    enif_mutex_unlock(reg->lock);
    return ccn_no_cache(env, argv[0]);
  }
  int n = atomic_load_explicit(&reg->count, memory_order_relaxed);
  for (int i = 0; i < n; i++) {
    if (atomic_load_explicit(&reg->slots[i], memory_order_relaxed) == inst) {
      atomic_store_explicit(&reg->slots[i], NULL, memory_order_release);
    }
  }
  atomic_store(&inst->closed, 1);
  enif_mutex_unlock(reg->lock);
  for (int i = 0; i < CCN_REPLICAS; i++) {
    while (atomic_load(&inst->per_slot[i].active) != 0) sched_yield(); /* NIF calls: short */
  }
  ccn_flights_abort(env, inst);
  ccache_clear(inst->c);
  ccn_unhold(inst); /* the registry's */
  return ccn_atom_ok;
}
