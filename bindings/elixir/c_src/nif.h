/* Internal declarations shared by the binding's NIF sources (not installed). */
#ifndef CCACHE_ELIXIR_NIF_H
#define CCACHE_ELIXIR_NIF_H

#include <stdatomic.h>
#include <stdint.h>
#include <erl_nif.h>
#include "ccache.h"

/* Most named caches open at once in one VM (a closed one frees its slot). */
#define CCN_MAX_INSTANCES 64

/* Reference terms of one value per thread slot (see ccn_replica). */
#define CCN_REPLICAS 16

struct ccn_replica;

/* A key in either mode: a fast cache uses `key` only (check is 0). */
typedef ccache_strong_key ccn_key;

/* A value in the cache, and the ccache closure of its entry: a resource,
 * held by the entry (one reference, released by destroy_closure) and by its
 * replicas.  Immutable once made, so any number of threads may copy `term`
 * out of `env` at once (enif_make_copy only reads it). */
typedef struct ccn_value {
  struct ccn_instance *inst;
  ErlNifEnv *env;         /* a term value: process-independent, or NULL */
  ERL_NIF_TERM term;      /* the value, living in env */
  uint64_t ext_bytes;     /* byte size of enif_term_to_binary(value), measured at put */
  ccache_program *native; /* a native program: one handle (+1), or NULL */
  ccn_key pkey;           /* native: its program key (another handle: ccn_program_fetch) */
  /* A term value put from a reference to another value: that value (one
   * resource reference), whose env and term this one shares (never freed
   * here).  NULL for a value that owns its env. */
  struct ccn_value *origin;
  /* The entry's replicas, one per thread slot, made at the first reference
   * fetch on that slot; owned by the entry (released with it).  Read only
   * under a lease, so never after the entry is destroyed. */
  _Atomic(struct ccn_replica *) replicas[CCN_REPLICAS];
} ccn_value;

/* What a reference term is: a resource that holds its value.  A reference
 * fetch makes a term of the calling thread's replica, so the reference
 * count it increments (and the garbage collector later decrements) is
 * written by that thread only: fetches on different schedulers write no
 * shared memory, and no fetch allocates. */
typedef struct ccn_replica {
  ccn_value *value; /* one resource reference on it */
} ccn_replica;

/* What ccache holds as the native program of a native entry. */
typedef struct ccn_native {
  void *native;
  void (*destroy)(void *native, void *ctx);
  void *ctx;
} ccn_native;

struct ccn_flight;
struct ccn_instance;

/* A counter of one thread slot, on its own cache line. */
typedef struct ccn_slot_count {
  _Atomic uint64_t copies_inline;
  _Atomic uint64_t active; /* NIF calls of this slot inside the C cache (instance.c) */
  char pad_[48];
} ccn_slot_count;

/* One named cache.  The struct is never freed (a closed cache's stays, see
 * instance.c), so pointers to it may be kept anywhere; an owner that
 * crashes and restarts finds it again by name.  The fields every fetch reads come first and are written
 * only at open; a fetch writes nothing here but its own slot's counter. */
typedef struct ccn_instance {
  ERL_NIF_TERM name;           /* an atom: the same value in every environment */
  ccache *c;                   /* never closed */
  ccache_program *term_prog;   /* one program (NULL native) all term entries share */
  _Atomic uint64_t inline_max; /* ext bytes up to which work stays on a normal scheduler */
  int manual_clock;            /* clock is `now_ms` below (tests), sweeper off */
  int strong;                  /* keys: :strong (CCACHE_KEYS_STRONG, 32-byte keys) */
  _Atomic int closed;          /* set once by close (instance.c) */
  char pad_[64];               /* the lines below are written */
  _Atomic int64_t holds;       /* instance.c: the last one closes the C cache */
  _Atomic uint64_t now_ms;
  /* binding counters (stats/1) */
  _Atomic uint64_t puts_inline, puts_dirty, copies_dirty;
  _Atomic uint64_t natives_destroyed, values_alive;
  _Atomic uint64_t next_native; /* program keys of natives handed in */
  /* single-flight records (flight.c), under flight_lock */
  ErlNifMutex *flight_lock;
  struct ccn_flight *flights;
  ccn_slot_count per_slot[CCN_REPLICAS]; /* inline copies, by thread slot */
} ccn_instance;

/* Everything that must outlive a module reload: found through priv_data,
 * handed on by the upgrade callback. */
typedef struct ccn_registry {
  ErlNifMutex *lock;                              /* serialises opens; lookups are lock-free */
  ccn_instance *_Atomic slots[CCN_MAX_INSTANCES]; /* NULL: free (a closed cache's) */
  _Atomic int count;                              /* slots[0..count) were used */
  _Atomic uint64_t loads, upgrades;
} ccn_registry;

/* A native program handed in through ccache_nif.h, before and after it is
 * put.  `lock` guards the rest. */
typedef struct ccn_prog {
  ErlNifMutex *lock;
  ccn_native *pending; /* owned here until first put (NULL after) */
  uint64_t cost_bytes;
  ccn_key pkey;           /* its program key once interned */
  ccn_instance *inst;     /* the cache it was interned in (NULL before) */
  ccache_program *handle; /* +1 on inst->c after the first put */
} ccn_prog;

extern ErlNifResourceType *ccn_value_type;
extern ErlNifResourceType *ccn_replica_type;
extern ErlNifResourceType *ccn_prog_type;
extern ErlNifResourceType *ccn_sending_type; /* flight.c */
void ccn_sending_dtor(ErlNifEnv *env, void *obj);
void ccn_flights_abort(ErlNifEnv *env, ccn_instance *inst);

/* atoms (nif.c) */
extern ERL_NIF_TERM ccn_atom_ok, ccn_atom_error, ccn_atom_cache_miss, ccn_atom_no_cache,
    ccn_atom_infinity, ccn_atom_copy, ccn_atom_ref, ccn_atom_owner, ccn_atom_wait,
    ccn_atom_deadlock, ccn_atom_retry, ccn_atom_ccache_flight, ccn_atom_not_owner, ccn_atom_true,
    ccn_atom_false, ccn_atom_native, ccn_atom_term, ccn_atom_other_cache;

/* instance.c */
ccn_instance *ccn_lookup(ErlNifEnv *env, ERL_NIF_TERM name); /* no enter: flights only */
ccn_instance *ccn_enter(ErlNifEnv *env, ERL_NIF_TERM name);  /* NULL: none or closed */
void ccn_leave(ccn_instance *inst);
void ccn_hold(ccn_instance *inst);
void ccn_unhold(ccn_instance *inst);
ERL_NIF_TERM ccn_no_cache(ErlNifEnv *env, ERL_NIF_TERM name);
int ccn_get_bound(ErlNifEnv *env, ERL_NIF_TERM t, uint64_t *out);
ERL_NIF_TERM ccn_nif_open(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* NIF fn(env, argc, argv) whose argv[0] names a cache: fn##_in(env, inst,
 * argv) runs between ccn_enter and ccn_leave (see instance.c). */
#define ENTERED(fn)                                                             \
  static ERL_NIF_TERM fn(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) { \
    (void)argc;                                                                 \
    ccn_instance *inst = ccn_enter(env, argv[0]);                               \
    if (inst == NULL) return ccn_no_cache(env, argv[0]);                        \
    ERL_NIF_TERM r = fn##_in(env, inst, argv);                                  \
    ccn_leave(inst);                                                            \
    return r;                                                                   \
  }

/* keys.c */
int ccn_strong_available(void); /* CCACHE_OK, or why strong keys cannot be made */
int ccn_get_key(ErlNifEnv *env, const ccn_instance *inst, ERL_NIF_TERM term, ccn_key *out);
ERL_NIF_TERM ccn_nif_hash(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
void ccn_program_key(ccn_instance *inst, const char *tag, uint64_t n, ccn_key *out);
int ccn_fetch(ccn_instance *inst, const ccn_key *k, ccache_lease *lease);
int ccn_put(ccn_instance *inst, const ccn_key *k, void *closure, ccache_program *p);
int ccn_remove(ccn_instance *inst, const ccn_key *k);
int ccn_program_intern(ccn_instance *inst, const ccn_key *pk, void *native, uint64_t cost,
                       ccache_program **out);
int ccn_program_fetch(ccn_instance *inst, const ccn_key *pk, ccache_program **out);

/* nif.c */
ccn_registry *ccn_registry_in_use(ErlNifEnv *env);
ERL_NIF_TERM ccn_error_status(ErlNifEnv *env, int status);
ERL_NIF_TERM ccn_ok(ErlNifEnv *env, ERL_NIF_TERM value);

/* values.c: the closure/program destroy callbacks given to ccache_open() */
void ccn_destroy_closure(void *obj, void *ctx);
void ccn_destroy_program(void *obj, void *ctx);
void ccn_value_dtor(ErlNifEnv *env, void *obj);
void ccn_replica_dtor(ErlNifEnv *env, void *obj);
ccn_value *ccn_ref_get(ErlNifEnv *env, ERL_NIF_TERM term);
ERL_NIF_TERM ccn_lease_ref(ErlNifEnv *env, ccn_instance *inst, ccache_lease *lease);
ERL_NIF_TERM ccn_value_ref(ErlNifEnv *env, ccn_value *v);
int ccn_thread_slot(void);
void ccn_prog_dtor(ErlNifEnv *env, void *obj);
ERL_NIF_TERM ccn_nif_put(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_fetch(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_ref_value(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_ref_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* flight.c */
void ccn_sending_dtor(ErlNifEnv *env, void *obj);
void ccn_flights_abort(ErlNifEnv *env, ccn_instance *inst);
ERL_NIF_TERM ccn_nif_flight_join(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_flight_finish(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM ccn_nif_flight_waiters(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* native.c */
int ccn_prog_native(ErlNifEnv *env, ERL_NIF_TERM term, void **native_out);

#endif
