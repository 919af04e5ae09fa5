/* Single-flight records for CCache.get_or_compile/3.  Nothing here waits:
 * a call claims the compile or registers the caller as a waiter and
 * returns at once; the waiting is a `receive` in Elixir (with a monitor on
 * the compiling process), and the compiler's finish sends each waiter one
 * message.  The C single-flight (ccache_get_or_compile) blocks its thread
 * and is not used from here.
 *
 * Every call holds inst->flight_lock for O(1) work: a join appends to a
 * block list, a finish takes the flight out of the table and then sends
 * its messages outside the lock, in slices of bounded time (each a NIF
 * call; enif_schedule_nif continues).  No callback of ccache or of a NIF
 * author runs under the lock. */
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

/* Waiters are appended to blocks (no realloc, no copy: a join is O(1)
 * whatever the number of waiters). */
enum { BLOCK_WAITERS = 1024 };
typedef struct ccn_block {
  struct ccn_block *next;
  unsigned n;
  ccn_waiter w[BLOCK_WAITERS];
} ccn_block;

typedef struct ccn_flight {
  ccn_key key;
  ErlNifPid owner;
  uint64_t id;    /* which flight of this key: a rejoin after a DOWN names it */
  ErlNifEnv *env; /* holds the waiters' refs (and, at the finish, the result) */
  ccn_block *first, *last;
  unsigned n_waiters;
  UT_hash_handle hh;
} ccn_flight;

/* A finished flight whose messages are being sent, chunk by chunk (a
 * resource, so a sender killed between chunks leaks nothing). */
typedef struct ccn_sending {
  ccn_flight *f;
  ErlNifPid owner;  /* not sent to: an owner that took over is registered too */
  ERL_NIF_TERM msg; /* in f->env */
  ccn_block *block;
  unsigned i;
} ccn_sending;

ErlNifResourceType *ccn_sending_type;

static void flight_free(ccn_flight *f) {
  while (f->first != NULL) {
    ccn_block *b = f->first;
    f->first = b->next;
    enif_free(b);
  }
  enif_free_env(f->env);
  enif_free(f);
}

void ccn_sending_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  ccn_sending *s = obj;
  if (s->f != NULL) flight_free(s->f);
}

static int add_waiter(ccn_flight *f, const ErlNifPid *pid, ERL_NIF_TERM ref) {
  if (f->last == NULL || f->last->n == BLOCK_WAITERS) {
    ccn_block *b = enif_alloc(sizeof *b);
    if (b == NULL) return 0;
    b->next = NULL;
    b->n = 0;
    if (f->last != NULL)
      f->last->next = b;
    else
      f->first = b;
    f->last = b;
  }
  ccn_waiter *w = &f->last->w[f->last->n++];
  w->pid = *pid;
  w->ref = enif_make_copy(f->env, ref);
  f->n_waiters++;
  return 1;
}

static ccn_flight *flight_new(ccn_instance *inst, const ccn_key *k, const ErlNifPid *owner) {
  static _Atomic uint64_t next_id;
  ccn_flight *f = enif_alloc(sizeof *f);
  ErlNifEnv *fenv = f == NULL ? NULL : enif_alloc_env();
  if (fenv == NULL) {
    enif_free(f);
    return NULL;
  }
  memset(f, 0, sizeof *f);
  f->key = *k;
  f->owner = *owner;
  f->id = atomic_fetch_add(&next_id, 1) + 1;
  f->env = fenv;
  flight_oom = 0;
  HASH_ADD(hh, inst->flights, key, sizeof f->key, f);
  if (flight_oom) {
    flight_free(f);
    return NULL;
  }
  return f;
}

/* flight_join(name, key, wref, nil | {dead_owner, flight_id}) ->
 *   :owner                 the caller compiles (a new flight, or it took over
 *                          the flight of dead_owner, which its monitor saw die)
 *   {:wait, owner, id}     the caller is registered and waits for
 *                          {:ccache_flight, wref, result} or owner's 'DOWN'
 *   :deadlock              the caller already owns this key's flight
 * A rejoin (after the DOWN of the owner of flight id) is not registered
 * again in that flight: it still is.  O(1) under the lock, whatever the
 * number of waiters. */
ERL_NIF_TERM ccn_nif_flight_join(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_instance *inst = ccn_lookup(env, argv[0]);
  ccn_key k;
  ErlNifPid self, dead;
  if (inst == NULL) return ccn_no_cache(env, argv[0]);
  if (!ccn_get_key(env, inst, argv[1], &k) || !enif_is_ref(env, argv[2]) ||
      !enif_self(env, &self)) {
    return enif_make_badarg(env);
  }
  int arity;
  const ERL_NIF_TERM *rejoin;
  ErlNifUInt64 dead_id = 0;
  int have_dead = enif_get_tuple(env, argv[3], &arity, &rejoin) && arity == 2 &&
                  enif_get_local_pid(env, rejoin[0], &dead) &&
                  enif_get_uint64(env, rejoin[1], &dead_id);
  ERL_NIF_TERM result;
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f;
  HASH_FIND(hh, inst->flights, &k, sizeof k, f);
  if (f == NULL) {
    f = flight_new(inst, &k, &self);
    result = f == NULL ? ccn_error_status(env, CCACHE_ENOMEM) : ccn_atom_owner;
  } else if (enif_compare_pids(&f->owner, &self) == 0) {
    result = ccn_atom_deadlock;
  } else if (have_dead && f->id == dead_id && enif_compare_pids(&f->owner, &dead) == 0) {
    f->owner = self; /* its registration stays: the finish skips the owner */
    result = ccn_atom_owner;
  } else if ((have_dead && f->id == dead_id) || add_waiter(f, &self, argv[2])) {
    result = enif_make_tuple3(env, ccn_atom_wait, enif_make_pid(env, &f->owner),
                              enif_make_uint64(env, f->id));
  } else {
    result = ccn_error_status(env, CCACHE_ENOMEM);
  }
  enif_mutex_unlock(inst->flight_lock);
  return result;
}

/* Messages sent per slice of a finish, and the time a slice may take: the
 * rest goes to the next slice (enif_schedule_nif), so no call runs long
 * however many waiters there are. */
enum { SEND_CHUNK = 64 };
#define SEND_SLICE_NS 200000

static ERL_NIF_TERM send_slice(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_sending *s;
  if (!enif_get_resource(env, argv[0], ccn_sending_type, (void **)&s)) {
    return enif_make_badarg(env);
  }
  ErlNifTime t0 = enif_monotonic_time(ERL_NIF_NSEC);
  ERL_NIF_TERM msg = enif_make_copy(env, s->msg);
  for (unsigned sent = 0; s->block != NULL; sent++) {
    if (sent == SEND_CHUNK) {
      if (enif_monotonic_time(ERL_NIF_NSEC) - t0 > SEND_SLICE_NS) {
        enif_consume_timeslice(env, 100); /* so the process yields before the next slice */
        return enif_schedule_nif(env, "flight_send", 0, send_slice, 1, argv);
      }
      sent = 0;
    }
    if (s->i == s->block->n) {
      s->block = s->block->next;
      s->i = 0;
      continue;
    }
    const ccn_waiter *w = &s->block->w[s->i++];
    if (enif_compare_pids(&w->pid, &s->owner) == 0) continue;
    ERL_NIF_TERM m =
        enif_make_tuple3(env, ccn_atom_ccache_flight, enif_make_copy(env, w->ref), msg);
    enif_send(env, &w->pid, NULL, m); /* a dead waiter is no error */
  }
  return ccn_atom_ok;
}

/* flight_finish(name, key, result) by the owner: ends the flight and sends
 * each waiter {:ccache_flight, wref, msg}, where msg is {:ok, ref} for
 * result :ok (one reference on the entry now cached, shared by all
 * waiters; :retry if the entry already left the cache), or result itself
 * ({:ok, ref} from the put that stored the value, or {:error, reason}).
 * The flight leaves the table at once (O(1) under the lock); the messages
 * are sent outside the lock, in slices.  -> :ok | :not_owner */
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
  ccn_sending *s = enif_alloc_resource(ccn_sending_type, sizeof *s);
  if (s == NULL) return ccn_error_status(env, CCACHE_ENOMEM);
  memset(s, 0, sizeof *s);
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f;
  HASH_FIND(hh, inst->flights, &k, sizeof k, f);
  if (f == NULL || enif_compare_pids(&f->owner, &self) != 0) {
    enif_mutex_unlock(inst->flight_lock);
    enif_release_resource(s);
    return ccn_atom_not_owner;
  }
  HASH_DEL(inst->flights, f);
  enif_mutex_unlock(inst->flight_lock);
  s->f = f;
  s->owner = self;
  s->msg = enif_make_copy(f->env, msg);
  s->block = f->first;
  ERL_NIF_TERM st = enif_make_resource(env, s);
  enif_release_resource(s); /* the term holds it until the last slice is done */
  return send_slice(env, 1, &st);
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

/* At close (a dirty NIF): every flight ends, each waiter gets
 * {:error, :no_cache} (a compiler that finishes later finds no flight). */
void ccn_flights_abort(ErlNifEnv *env, ccn_instance *inst) {
  ERL_NIF_TERM msg = enif_make_tuple2(env, ccn_atom_error, ccn_atom_no_cache);
  enif_mutex_lock(inst->flight_lock);
  ccn_flight *f, *tmp;
  HASH_ITER(hh, inst->flights, f, tmp) {
    HASH_DEL(inst->flights, f);
    for (ccn_block *b = f->first; b != NULL; b = b->next) {
      for (unsigned i = 0; i < b->n; i++) {
        ERL_NIF_TERM m =
            enif_make_tuple3(env, ccn_atom_ccache_flight, enif_make_copy(env, b->w[i].ref), msg);
        enif_send(env, &b->w[i].pid, NULL, m);
      }
    }
    flight_free(f);
  }
  enif_mutex_unlock(inst->flight_lock);
}
