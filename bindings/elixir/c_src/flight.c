/* Single-flight records for CCache.get_or_compile/3.  Nothing here waits:
 * a call claims the compile or registers the caller as a waiter and
 * returns at once; the waiting is a `receive` in Elixir (with a monitor on
 * the compiling process), and the compiler's finish sends each waiter one
 * message.  The C single-flight (ccache_get_or_compile) blocks its thread
 * and is not used from here.
 *
 * Every call holds inst->flight_lock for O(waiters of that key) work (the
 * finish sends its messages under it, see there); no callback of ccache
 * or of a NIF author runs under it. */
#include <string.h>
#include "nif.h"

/* uthash's default on a failed allocation is exit(): report it instead
 * (set under the instance's flight_lock, read right after the add). */
static _Thread_local int flight_oom;
#define HASH_NONFATAL_OOM        1
#define uthash_nonfatal_oom(obj) (flight_oom = 1)
#define uthash_malloc(sz)        enif_alloc(sz)
#define uthash_free(ptr, sz)     enif_free(ptr)
#include <uthash.h>

typedef struct ccn_waiter {
  ErlNifPid pid;
  ERL_NIF_TERM ref; /* the waiter's make_ref(), living in the flight's env */
} ccn_waiter;

typedef struct ccn_flight {
  ccn_key key;
  ErlNifPid owner;
  ErlNifEnv *env; /* holds the waiters' refs */
  ccn_waiter *waiters;
  unsigned n_waiters, cap_waiters;
  UT_hash_handle hh;
} ccn_flight;

static void flight_free(ccn_flight *f) {
  enif_free_env(f->env);
  enif_free(f->waiters);
  enif_free(f);
}

static int has_waiter(const ccn_flight *f, ERL_NIF_TERM ref) {
  for (unsigned i = 0; i < f->n_waiters; i++) {
    if (enif_is_identical(f->waiters[i].ref, ref)) return 1;
  }
  return 0;
}

static void drop_waiters_of(ccn_flight *f, const ErlNifPid *pid) {
  unsigned j = 0;
  for (unsigned i = 0; i < f->n_waiters; i++) {
    if (enif_compare_pids(&f->waiters[i].pid, pid) != 0) f->waiters[j++] = f->waiters[i];
  }
  f->n_waiters = j;
}

static int add_waiter(ccn_flight *f, const ErlNifPid *pid, ERL_NIF_TERM ref) {
  if (f->n_waiters == f->cap_waiters) {
    unsigned cap = f->cap_waiters ? 2 * f->cap_waiters : 4;
    ccn_waiter *w = enif_realloc(f->waiters, cap * sizeof *w);
    if (w == NULL) return 0;
    f->waiters = w;
    f->cap_waiters = cap;
  }
  f->waiters[f->n_waiters].pid = *pid;
  f->waiters[f->n_waiters].ref = enif_make_copy(f->env, ref);
  f->n_waiters++;
  return 1;
}

/* flight_join(name, key, wref, dead_owner | nil) ->
 *   :owner            the caller compiles (a new flight, or it took over the
 *                     flight of dead_owner, which its monitor saw die)
 *   {:wait, owner}    the caller is registered (once per wref) and waits for
 *                     {:ccache_flight, wref, result} or owner's 'DOWN'
 *   :deadlock         the caller already owns this key's flight
 */
ERL_NIF_TERM ccn_nif_flight_join(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_instance *inst = ccn_lookup(env, argv[0]);
  ccn_key k;
  ErlNifPid self, dead;
  if (inst == NULL || !ccn_get_key(env, inst, argv[1], &k) || !enif_is_ref(env, argv[2]) ||
      !enif_self(env, &self)) {
    return enif_make_badarg(env);
  }
  int have_dead = enif_get_local_pid(env, argv[3], &dead);
  ERL_NIF_TERM result;
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f;
  HASH_FIND(hh, inst->flights, &k, sizeof k, f);
  if (f == NULL) {
    f = enif_alloc(sizeof *f);
    ErlNifEnv *fenv = f == NULL ? NULL : enif_alloc_env();
    if (fenv == NULL) {
      enif_mutex_unlock(inst->flight_lock);
      enif_free(f);
      return ccn_error_status(env, CCACHE_ENOMEM);
    }
    memset(f, 0, sizeof *f);
    f->key = k;
    f->owner = self;
    f->env = fenv;
    flight_oom = 0;
    HASH_ADD(hh, inst->flights, key, sizeof f->key, f);
    if (flight_oom) {
      enif_mutex_unlock(inst->flight_lock);
      flight_free(f);
      return ccn_error_status(env, CCACHE_ENOMEM);
    }
    result = ccn_atom_owner;
  } else if (enif_compare_pids(&f->owner, &self) == 0) {
    result = ccn_atom_deadlock;
  } else if (have_dead && enif_compare_pids(&f->owner, &dead) == 0) {
    f->owner = self;
    drop_waiters_of(f, &self);
    result = ccn_atom_owner;
  } else {
    if (!has_waiter(f, argv[2]) && !add_waiter(f, &self, argv[2])) {
      enif_mutex_unlock(inst->flight_lock);
      return ccn_error_status(env, CCACHE_ENOMEM);
    }
    result = enif_make_tuple2(env, ccn_atom_wait, enif_make_pid(env, &f->owner));
  }
  enif_mutex_unlock(inst->flight_lock);
  return result;
}

/* flight_finish(name, key, result) by the owner: ends the flight and sends
 * each waiter {:ccache_flight, wref, msg}, where msg is {:ok, ref} for
 * result :ok (one reference on the entry now cached, shared by all
 * waiters; :retry if the entry already left the cache), or result itself
 * ({:ok, ref} from the put that stored the value, or {:error, reason}).  -> :ok | :not_owner */
static ERL_NIF_TERM finish_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  ccn_key k;
  ErlNifPid self;
  if (!ccn_get_key(env, inst, argv[1], &k) || !enif_self(env, &self)) {
    return enif_make_badarg(env);
  }
  /* The waiters' reference is made before taking the lock (releasing a
   * lease can run destroy callbacks, which never run under our lock), and
   * only when there are waiters (the fetch counts as a hit).  A waiter
   * that joins between here and the finish gets :retry (and then hits). */
  ERL_NIF_TERM msg = argv[2];
  if (argv[2] == ccn_atom_ok) {
    enif_mutex_lock(inst->flight_lock);
    ccn_flight *f;
    HASH_FIND(hh, inst->flights, &k, sizeof k, f);
    unsigned n = f == NULL ? 0 : f->n_waiters;
    enif_mutex_unlock(inst->flight_lock);
    ccache_lease lease;
    ERL_NIF_TERM ref = 0;
    if (n > 0 && ccn_fetch(inst, &k, &lease) == CCACHE_OK) {
      ref = ccn_lease_ref(env, inst, &lease);
    }
    msg = ref != 0 ? ccn_ok(env, ref) : ccn_atom_retry;
  }
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f;
  HASH_FIND(hh, inst->flights, &k, sizeof k, f);
  if (f == NULL || enif_compare_pids(&f->owner, &self) != 0) {
    enif_mutex_unlock(inst->flight_lock);
    return ccn_atom_not_owner;
  }
  HASH_DEL(inst->flights, f);
  /* Sent under the lock: a process that joins after this finish (and so
   * starts a new flight) finds every message of this one already in its
   * mailbox, and can flush it. */
  for (unsigned i = 0; i < f->n_waiters; i++) {
    ERL_NIF_TERM m =
        enif_make_tuple3(env, ccn_atom_ccache_flight, enif_make_copy(env, f->waiters[i].ref), msg);
    enif_send(env, &f->waiters[i].pid, NULL, m); /* a dead waiter is no error */
  }
  enif_mutex_unlock(inst->flight_lock);
  flight_free(f);
  return ccn_atom_ok;
}
ENTERED(finish)
ERL_NIF_TERM ccn_nif_flight_finish(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  return finish(env, argc, argv);
}

/* flight_waiters(name, key) -> number of processes registered as waiters
 * (0 when no flight) */
ERL_NIF_TERM ccn_nif_flight_waiters(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_instance *inst = ccn_lookup(env, argv[0]);
  ccn_key k;
  if (inst == NULL || !ccn_get_key(env, inst, argv[1], &k)) return enif_make_badarg(env);
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f;
  HASH_FIND(hh, inst->flights, &k, sizeof k, f);
  unsigned n = f == NULL ? 0 : f->n_waiters;
  enif_mutex_unlock(inst->flight_lock);
  return enif_make_uint(env, n);
}
