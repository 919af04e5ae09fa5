/* The NIF library of CCache.Nif: load and upgrade, the registry of named
 * caches, bounds, stats and key hashing.  Values live in values.c, the
 * single-flight records in flight.c, the table for other NIFs in native.c.
 *
 * Scheduler rule kept by every function here: work on a normal scheduler
 * is bounded by a constant or by the instance's inline_max; anything that
 * grows with a term's size runs on a dirty CPU scheduler. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <string.h>
#include "nif.h"

ErlNifResourceType *ccn_value_type;
ErlNifResourceType *ccn_replica_type;
ErlNifResourceType *ccn_prog_type;

ERL_NIF_TERM ccn_atom_ok, ccn_atom_error, ccn_atom_cache_miss, ccn_atom_no_cache, ccn_atom_infinity,
    ccn_atom_copy, ccn_atom_ref, ccn_atom_owner, ccn_atom_wait, ccn_atom_deadlock, ccn_atom_retry,
    ccn_atom_ccache_flight, ccn_atom_not_owner, ccn_atom_true, ccn_atom_false, ccn_atom_native,
    ccn_atom_term, ccn_atom_other_cache;

/* This library's own registry.  After an upgrade from another file the
 * registry of the first library is used instead (priv_data). */
static ccn_registry own_registry;

/* The registry in use, set at load and upgrade.  Not enif_priv_data():
 * the ccache_nif.h functions run in other libraries' NIF calls, whose
 * environments carry those libraries' private data. */
static ccn_registry *_Atomic registry_in_use;

ccn_registry *ccn_registry_in_use(ErlNifEnv *env) {
  (void)env;
  return atomic_load_explicit(&registry_in_use, memory_order_acquire);
}

ERL_NIF_TERM ccn_ok(ErlNifEnv *env, ERL_NIF_TERM value) {
  return enif_make_tuple2(env, ccn_atom_ok, value);
}

/* {:error, {:ccache, status, text}} */
ERL_NIF_TERM ccn_error_status(ErlNifEnv *env, int status) {
  const char *text = ccache_strerror(status);
  ERL_NIF_TERM detail =
      enif_make_tuple3(env, enif_make_atom(env, "ccache"), enif_make_int(env, status),
                       enif_make_string(env, text, ERL_NIF_LATIN1));
  return enif_make_tuple2(env, ccn_atom_error, detail);
}

static ERL_NIF_TERM make_bound(ErlNifEnv *env, uint64_t v) {
  return v == CCACHE_UNBOUNDED ? ccn_atom_infinity : enif_make_uint64(env, v);
}

/* set_limits(name, max_items, ttl, inline_max) */
static ERL_NIF_TERM nif_set_limits_in(ErlNifEnv *env, ccn_instance *inst,
                                      const ERL_NIF_TERM argv[]) {
  uint64_t max_items, ttl, inline_max;
  if (!ccn_get_bound(env, argv[1], &max_items) || !ccn_get_bound(env, argv[2], &ttl) ||
      !ccn_get_bound(env, argv[3], &inline_max)) {
    return enif_make_badarg(env);
  }
  int rc = ccache_set_limits(inst->c, max_items, ttl, CCACHE_UNBOUNDED);
  if (rc == CCACHE_OK) atomic_store(&inst->inline_max, inline_max);
  return rc == CCACHE_OK ? ccn_atom_ok : ccn_error_status(env, rc);
}
ENTERED(nif_set_limits)

/* limits(name) -> {:ok, %{max_items: _, ttl: _, inline_max: _}} */
static ERL_NIF_TERM nif_limits_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  (void)argv;
  uint64_t max_items, ttl;
  int rc = ccache_get_limits(inst->c, &max_items, &ttl, NULL);
  if (rc != CCACHE_OK) return ccn_error_status(env, rc);
  ERL_NIF_TERM keys[3] = {enif_make_atom(env, "max_items"), enif_make_atom(env, "ttl"),
                          enif_make_atom(env, "inline_max")};
  ERL_NIF_TERM vals[3] = {make_bound(env, max_items), make_bound(env, ttl),
                          make_bound(env, atomic_load(&inst->inline_max))};
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys, vals, 3, &map);
  return ccn_ok(env, map);
}
ENTERED(nif_limits)

/* stats(name) -> {:ok, map} */
static ERL_NIF_TERM nif_stats_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  (void)argv;
  ccache_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  ccache_stats_get(inst->c, &s);
  uint64_t copies_inline = 0;
  for (int i = 0; i < CCN_REPLICAS; i++)
    copies_inline += atomic_load(&inst->per_slot[i].copies_inline);
  struct {
    const char *name;
    uint64_t v;
  } f[] = {
      {"hits", s.hits},
      {"misses", s.misses},
      {"inserts", s.inserts},
      {"replaced", s.replaced},
      {"evicted_capacity", s.evicted_capacity},
      {"evicted_ttl", s.evicted_ttl},
      {"removed", s.removed},
      {"cleared", s.cleared},
      {"items", s.items},
      /* the shared program of term values is not counted */
      {"programs", s.programs - 1},
      {"closures_destroyed", s.closures_destroyed},
      {"natives_destroyed", atomic_load(&inst->natives_destroyed)},
      {"leases_out", s.leases_out},
      {"values", atomic_load(&inst->values_alive)},
      {"puts_inline", atomic_load(&inst->puts_inline)},
      {"puts_dirty", atomic_load(&inst->puts_dirty)},
      {"copies_inline", copies_inline},
      {"copies_dirty", atomic_load(&inst->copies_dirty)},
  };
  enum { N = sizeof f / sizeof f[0] };
  ERL_NIF_TERM keys[N], vals[N], map;
  for (int i = 0; i < N; i++) {
    keys[i] = enif_make_atom(env, f[i].name);
    vals[i] = enif_make_uint64(env, f[i].v);
  }
  enif_make_map_from_arrays(env, keys, vals, N, &map);
  return ccn_ok(env, map);
}
ENTERED(nif_stats)

/* remove(name, key) -> :ok | {:error, :cache_miss} */
static ERL_NIF_TERM nif_remove_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  ccn_key k;
  if (!ccn_get_key(env, inst, argv[1], &k)) return enif_make_badarg(env);
  int rc = ccn_remove(inst, &k);
  if (rc == CCACHE_MISS) return enif_make_tuple2(env, ccn_atom_error, ccn_atom_cache_miss);
  return rc == CCACHE_OK ? ccn_atom_ok : ccn_error_status(env, rc);
}
ENTERED(nif_remove)

static ERL_NIF_TERM nif_clear_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  (void)argv;
  int rc = ccache_clear(inst->c);
  return rc == CCACHE_OK ? ccn_atom_ok : ccn_error_status(env, rc);
}
ENTERED(nif_clear)

/* advance_clock(name, ms): only for caches opened with the manual clock */
static ERL_NIF_TERM nif_advance_clock_in(ErlNifEnv *env, ccn_instance *inst,
                                         const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 ms;
  if (!inst->manual_clock || !enif_get_uint64(env, argv[1], &ms)) return enif_make_badarg(env);
  return enif_make_uint64(env, atomic_fetch_add(&inst->now_ms, ms) + ms);
}
ENTERED(nif_advance_clock)

/* so_path() -> the path this library was loaded from (for ccache_nif.h) */
static ERL_NIF_TERM nif_so_path(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  Dl_info info;
  if (dladdr((void *)&own_registry, &info) == 0 || info.dli_fname == NULL) {
    return enif_make_badarg(env);
  }
  ERL_NIF_TERM t;
  size_t n = strlen(info.dli_fname);
  memcpy(enif_make_new_binary(env, n, &t), info.dli_fname, n);
  return t;
}

/* load_info() -> {loads, upgrades} of the registry (tests) */
static ERL_NIF_TERM nif_load_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  ccn_registry *reg = ccn_registry_in_use(env);
  return enif_make_tuple2(env, enif_make_uint64(env, atomic_load(&reg->loads)),
                          enif_make_uint64(env, atomic_load(&reg->upgrades)));
}

static void make_atoms(ErlNifEnv *env) {
  ccn_atom_ok = enif_make_atom(env, "ok");
  ccn_atom_error = enif_make_atom(env, "error");
  ccn_atom_cache_miss = enif_make_atom(env, "cache_miss");
  ccn_atom_no_cache = enif_make_atom(env, "no_cache");
  ccn_atom_infinity = enif_make_atom(env, "infinity");
  ccn_atom_copy = enif_make_atom(env, "copy");
  ccn_atom_ref = enif_make_atom(env, "ref");
  ccn_atom_owner = enif_make_atom(env, "owner");
  ccn_atom_wait = enif_make_atom(env, "wait");
  ccn_atom_deadlock = enif_make_atom(env, "deadlock");
  ccn_atom_retry = enif_make_atom(env, "retry");
  ccn_atom_ccache_flight = enif_make_atom(env, "ccache_flight");
  ccn_atom_not_owner = enif_make_atom(env, "not_owner");
  ccn_atom_true = enif_make_atom(env, "true");
  ccn_atom_false = enif_make_atom(env, "false");
  ccn_atom_native = enif_make_atom(env, "native");
  ccn_atom_term = enif_make_atom(env, "term");
  ccn_atom_other_cache = enif_make_atom(env, "other_cache");
}

static int open_types(ErlNifEnv *env, ErlNifResourceFlags flags) {
  ccn_value_type = enif_open_resource_type(env, NULL, "ccache_value", ccn_value_dtor, flags, NULL);
  ccn_prog_type = enif_open_resource_type(env, NULL, "ccache_program", ccn_prog_dtor, flags, NULL);
  ccn_replica_type =
      enif_open_resource_type(env, NULL, "ccache_ref", ccn_replica_dtor, flags, NULL);
  ccn_sending_type =
      enif_open_resource_type(env, NULL, "ccache_flight_send", ccn_sending_dtor, flags, NULL);
  return ccn_value_type != NULL && ccn_prog_type != NULL && ccn_replica_type != NULL &&
         ccn_sending_type != NULL;
}

/* The caches hold pointers to this library's functions (the destroy
 * callbacks, the clock) and other NIF libraries hold its ccache_nif_api
 * table, so the library must never be unmapped: take one more reference
 * on it, never given back. */
static int pin_self(void) {
  Dl_info info;
  if (dladdr((void *)&own_registry, &info) == 0 || info.dli_fname == NULL) return 0;
  return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) != NULL;
}

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
  (void)info;
  make_atoms(env);
  if (!open_types(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER) || !pin_self()) return 1;
  /* A second load of this (pinned) file after a full unload finds its
   * registry, and its caches, as they were. */
  if (own_registry.lock == NULL) {
    own_registry.lock = enif_mutex_create("ccache_registry");
    if (own_registry.lock == NULL) return 1;
  }
  atomic_fetch_add(&own_registry.loads, 1);
  *priv = &own_registry;
  atomic_store_explicit(&registry_in_use, &own_registry, memory_order_release);
  return 0;
}

static int on_upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info) {
  (void)info;
  make_atoms(env);
  if (!open_types(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER) || !pin_self()) return 1;
  ccn_registry *reg = (ccn_registry *)*old_priv;
  atomic_fetch_add(&reg->upgrades, 1);
  *priv = reg;
  atomic_store_explicit(&registry_in_use, reg, memory_order_release);
  return 0;
}

static void on_unload(ErlNifEnv *env, void *priv) {
  (void)env;
  (void)priv; /* the registry and its caches stay: they live until the VM exits */
}

static ErlNifFunc nif_funcs[] = {
    {"open", 6, ccn_nif_open, 0},
    {"close", 1, ccn_nif_close, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"set_limits", 4, nif_set_limits, 0},
    {"limits", 1, nif_limits, 0},
    {"stats", 1, nif_stats, 0},
    {"remove", 2, nif_remove, 0},
    {"clear", 1, nif_clear, 0},
    {"advance_clock", 2, nif_advance_clock, 0},
    {"hash", 2, ccn_nif_hash, 0},
    {"put", 4, ccn_nif_put, 0},
    {"fetch", 3, ccn_nif_fetch, 0},
    {"ref_value", 1, ccn_nif_ref_value, 0},
    {"ref_info", 1, ccn_nif_ref_info, 0},
    {"flight_join", 4, ccn_nif_flight_join, 0},
    {"flight_finish", 3, ccn_nif_flight_finish, 0},
    {"flight_waiters", 2, ccn_nif_flight_waiters, 0},
    {"so_path", 0, nif_so_path, 0},
    {"load_info", 0, nif_load_info, 0},
};

ERL_NIF_INIT(Elixir.CCache.Nif, nif_funcs, on_load, NULL, on_upgrade, on_unload)
