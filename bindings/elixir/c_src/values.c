/* Values: put, fetch (copying or by reference), reference terms, and the
 * destroy callbacks the caches run.
 *
 * The size that decides where a copy runs is the value's external-format
 * size, enif_term_to_binary()'s byte count, measured once at put.  A heap
 * term takes at most about two words per external byte (a list of [] is
 * 2 words of cons per 1-byte NIL_EXT; every other encoding is denser), so
 * a value of inline_max bytes (default 8 KiB) copies at most ~16 k words:
 * well under 1 ms.  Larger values are copied on a dirty CPU scheduler. */
#include <string.h>
#include "nif.h"

/* ---- values and the destroy callbacks (ccache_config) ---- */

void ccn_value_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  ccn_value *v = obj;
  if (v->origin != NULL) {
    enif_release_resource(v->origin); /* the env and term were the origin's */
  } else if (v->env != NULL) {
    enif_free_env(v->env);
  }
  if (v->native != NULL) ccache_program_release(v->inst->c, v->native);
  atomic_fetch_sub(&v->inst->values_alive, 1);
  ccn_unhold(v->inst); /* after the last use of its C cache */
}

/* A new value resource (one reference, the caller's), or NULL. */
static ccn_value *value_new(ccn_instance *inst) {
  ccn_value *v = enif_alloc_resource(ccn_value_type, sizeof *v);
  if (v == NULL) return NULL;
  memset(v, 0, sizeof *v);
  for (int i = 0; i < CCN_REPLICAS; i++) atomic_init(&v->replicas[i], NULL);
  v->inst = inst;
  ccn_hold(inst);
  atomic_fetch_add(&inst->values_alive, 1);
  return v;
}

/* The entry lets go of its replicas and its value; reference terms may
 * still hold them. */
void ccn_destroy_closure(void *obj, void *ctx) {
  (void)ctx;
  ccn_value *v = obj;
  for (int i = 0; i < CCN_REPLICAS; i++) {
    ccn_replica *r = atomic_load_explicit(&v->replicas[i], memory_order_acquire);
    if (r != NULL) enif_release_resource(r);
  }
  enif_release_resource(v);
}

void ccn_replica_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  enif_release_resource(((ccn_replica *)obj)->value);
}

ccn_value *ccn_ref_get(ErlNifEnv *env, ERL_NIF_TERM term) {
  ccn_replica *r;
  return enif_get_resource(env, term, ccn_replica_type, (void **)&r) ? r->value : NULL;
}

/* This thread's slot: threads take slots in turn (more threads than slots
 * share them, which is correct, only no longer free of shared writes). */
int ccn_thread_slot(void) {
  static _Atomic unsigned next;
  static _Thread_local int slot = -1;
  if (slot < 0) slot = (int)(atomic_fetch_add(&next, 1) % CCN_REPLICAS);
  return slot;
}

void ccn_destroy_program(void *obj, void *ctx) {
  ccn_native *n = obj;
  n->destroy(n->native, n->ctx);
  enif_free(n);
  atomic_fetch_add(&((ccn_instance *)ctx)->natives_destroyed, 1);
}

/* The reference term of @p v: this thread's replica, made on first use
 * (held by v's entry from then on).  0 when out of memory.  The caller
 * holds v (a lease, or v not yet handed to the cache). */
ERL_NIF_TERM ccn_value_ref(ErlNifEnv *env, ccn_value *v) {
  _Atomic(ccn_replica *) *slot = &v->replicas[ccn_thread_slot()];
  ccn_replica *r = atomic_load_explicit(slot, memory_order_acquire);
  if (r == NULL) {
    ccn_replica *mine = enif_alloc_resource(ccn_replica_type, sizeof *mine);
    if (mine == NULL) return 0;
    mine->value = v;
    enif_keep_resource(v);
    r = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &r, mine, memory_order_acq_rel,
                                                memory_order_acquire)) {
      r = mine; /* the entry's reference from here */
    } else {
      enif_release_resource(mine); /* another thread of this slot won */
    }
  }
  return enif_make_resource(env, r);
}

/* The reference term of a fetched entry's value; releases the lease.  0
 * when out of memory. */
ERL_NIF_TERM ccn_lease_ref(ErlNifEnv *env, ccn_instance *inst, ccache_lease *lease) {
  ERL_NIF_TERM t = ccn_value_ref(env, lease->closure);
  ccache_lease_release(inst->c, lease);
  return t;
}

/* ---- put ---- */

/* Whether the work of putting @p t inline is provably small: at most
 * inline_max / 4 subterms and inline_max bytes of binaries, no fun (whose
 * environment the NIF API cannot see into), no bignum, no bitstring that is
 * not whole bytes.  Visits at most that many subterms (~20 us at 8 KiB). */
static int provably_small(ErlNifEnv *env, ERL_NIF_TERM t, uint64_t inline_max) {
  enum { STACK = 256 };
  ERL_NIF_TERM stack[STACK];
  uint64_t terms = 0, bytes = 0, max_terms = inline_max / 4;
  int sp = 0;
  stack[sp++] = t;
  while (sp > 0) {
    t = stack[--sp];
    if (++terms > max_terms) return 0;
    switch (enif_term_type(env, t)) {
      case ERL_NIF_TERM_TYPE_ATOM:
      case ERL_NIF_TERM_TYPE_FLOAT:
      case ERL_NIF_TERM_TYPE_PID:
      case ERL_NIF_TERM_TYPE_PORT:
      case ERL_NIF_TERM_TYPE_REFERENCE:
        break;
      case ERL_NIF_TERM_TYPE_INTEGER: {
        ErlNifSInt64 i;
        ErlNifUInt64 u;
        if (!enif_get_int64(env, t, &i) && !enif_get_uint64(env, t, &u)) return 0;
        break;
      }
      case ERL_NIF_TERM_TYPE_BITSTRING: {
        ErlNifBinary b;
        if (!enif_inspect_binary(env, t, &b)) return 0;
        bytes += b.size;
        if (bytes > inline_max) return 0;
        break;
      }
      case ERL_NIF_TERM_TYPE_TUPLE: {
        int arity;
        const ERL_NIF_TERM *elems;
        enif_get_tuple(env, t, &arity, &elems);
        if (sp + arity > STACK) return 0;
        for (int i = 0; i < arity; i++) stack[sp++] = elems[i];
        break;
      }
      case ERL_NIF_TERM_TYPE_LIST: {
        ERL_NIF_TERM head, tail;
        while (enif_get_list_cell(env, t, &head, &tail)) {
          if (++terms > max_terms || sp == STACK) return 0;
          stack[sp++] = head;
          t = tail;
        }
        if (!enif_is_empty_list(env, t)) {
          if (sp == STACK) return 0;
          stack[sp++] = t; /* improper tail */
        }
        break;
      }
      case ERL_NIF_TERM_TYPE_MAP: {
        size_t n;
        ErlNifMapIterator it;
        ERL_NIF_TERM k, v;
        if (!enif_get_map_size(env, t, &n) || n > max_terms || sp + 2 * (int)n > STACK) return 0;
        if (!enif_map_iterator_create(env, t, &it, ERL_NIF_MAP_ITERATOR_FIRST)) return 0;
        while (enif_map_iterator_get_pair(env, &it, &k, &v)) {
          stack[sp++] = k;
          stack[sp++] = v;
          enif_map_iterator_next(env, &it);
        }
        enif_map_iterator_destroy(env, &it);
        break;
      }
      default: /* a fun, or a type added after OTP 25 */
        return 0;
    }
  }
  return 1;
}

/* Put @p v (the cache's from here, on error too) under @p key with program
 * @p p.  want_ref: answer {:ok, ref} with a reference made before the put,
 * so it is the value just put even if the entry leaves at once (a fetch
 * after the put could miss); else :ok. */
static ERL_NIF_TERM put_value(ErlNifEnv *env, ccn_instance *inst, const ccn_key *key, ccn_value *v,
                              ccache_program *p, int want_ref) {
  ERL_NIF_TERM ref = 0;
  if (want_ref && (ref = ccn_value_ref(env, v)) == 0) {
    ccn_destroy_closure(v, inst);
    return ccn_error_status(env, CCACHE_ENOMEM);
  }
  int rc = ccn_put(inst, key, v, p);
  if (rc != CCACHE_OK) return ccn_error_status(env, rc);
  return want_ref ? ccn_ok(env, ref) : ccn_atom_ok;
}

/* Copy @p value into a new process-independent environment and put it. */
static ERL_NIF_TERM store_term(ErlNifEnv *env, ccn_instance *inst, const ccn_key *key,
                               ERL_NIF_TERM value, int dirty, int want_ref) {
  ErlNifBinary ext;
  if (!enif_term_to_binary(env, value, &ext)) return ccn_error_status(env, CCACHE_ENOMEM);
  uint64_t ext_bytes = ext.size;
  enif_release_binary(&ext);
  ccn_value *v = value_new(inst);
  ErlNifEnv *venv = v == NULL ? NULL : enif_alloc_env();
  if (venv == NULL) {
    if (v != NULL) enif_release_resource(v);
    return ccn_error_status(env, CCACHE_ENOMEM);
  }
  v->env = venv;
  v->term = enif_make_copy(venv, value);
  v->ext_bytes = ext_bytes;
  atomic_fetch_add(dirty ? &inst->puts_dirty : &inst->puts_inline, 1);
  return put_value(env, inst, key, v, inst->term_prog, want_ref);
}

/* A new value holding one more handle on the program @p pkey of @p inst
 * (alive: the caller holds a handle).  NULL with *rc set on failure. */
static ccn_value *native_value(ccn_instance *inst, const ccn_key *pkey, int *rc) {
  ccache_program *handle = NULL;
  *rc = ccn_program_fetch(inst, pkey, &handle);
  if (*rc != CCACHE_OK) return NULL;
  ccn_value *v = value_new(inst);
  if (v == NULL) {
    ccache_program_release(inst->c, handle);
    *rc = CCACHE_ENOMEM;
    return NULL;
  }
  v->native = handle;
  v->pkey = *pkey;
  return v;
}

/* A reference to a value, put under another key: the same value, never a
 * copy.  A native program gets one more entry on the same program (of the
 * same cache only: a program belongs to one C cache); a term value shares
 * the stored term (O(1) whatever its size; the new value holds the one
 * that owns the environment). */
static ERL_NIF_TERM store_shared(ErlNifEnv *env, ccn_instance *inst, const ccn_key *key,
                                 ccn_value *src, int want_ref) {
  int rc = CCACHE_OK;
  ccn_value *v;
  if (src->native != NULL) {
    if (src->inst != inst) return enif_make_tuple2(env, ccn_atom_error, ccn_atom_other_cache);
    v = native_value(inst, &src->pkey, &rc);
    if (v == NULL) return ccn_error_status(env, rc);
    return put_value(env, inst, key, v, v->native, want_ref);
  }
  ccn_value *root = src->origin != NULL ? src->origin : src;
  v = value_new(inst);
  if (v == NULL) return ccn_error_status(env, CCACHE_ENOMEM);
  enif_keep_resource(root);
  v->origin = root;
  v->env = root->env;
  v->term = root->term;
  v->ext_bytes = root->ext_bytes;
  atomic_fetch_add(&inst->puts_inline, 1);
  return put_value(env, inst, key, v, inst->term_prog, want_ref);
}

/* A native program from ccache_nif.h: interned at its first put (its
 * program key is new, so two programs never merge), shared by every key
 * it is put under. */
static ERL_NIF_TERM store_native(ErlNifEnv *env, ccn_instance *inst, const ccn_key *key,
                                 ccn_prog *prog, int want_ref) {
  int rc = CCACHE_OK;
  enif_mutex_lock(prog->lock);
  if (prog->inst == NULL) {
    ccn_program_key(inst, "ccache-elixir: native program", atomic_fetch_add(&inst->next_native, 1),
                    &prog->pkey);
    ccn_native *n = prog->pending;
    prog->pending = NULL; /* the cache's from here, on error too */
    rc = ccn_program_intern(inst, &prog->pkey, n, prog->cost_bytes, &prog->handle);
    if (rc == CCACHE_OK) {
      prog->inst = inst;
      ccn_hold(inst); /* until the program term's dtor releases its handle */
    }
  } else if (prog->inst != inst) {
    enif_mutex_unlock(prog->lock);
    return enif_make_tuple2(env, ccn_atom_error, ccn_atom_other_cache);
  }
  /* The entry's value holds its own handle; the put (which may run
   * destroy callbacks) runs without prog->lock. */
  ccn_key pkey = prog->pkey;
  enif_mutex_unlock(prog->lock);
  if (rc != CCACHE_OK) return ccn_error_status(env, rc);
  ccn_value *v = native_value(inst, &pkey, &rc);
  if (v == NULL) return ccn_error_status(env, rc);
  return put_value(env, inst, key, v, v->native, want_ref);
}

static ERL_NIF_TERM put_dirty_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  ccn_key k;
  ccn_get_key(env, inst, argv[1], &k);
  return store_term(env, inst, &k, argv[2], 1, argv[3] == ccn_atom_ref);
}
ENTERED(put_dirty)

/* put(name, key, value, :ok | :ref) -> :ok (for :ref, {:ok, ref}: a
 * reference to the value just put) | {:error, _}.  The value is stored as
 * given: a program term, or a reference to a native program, puts that
 * program; a reference to a term value puts that stored term (shared);
 * any other term is copied in. */
static ERL_NIF_TERM put_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  ccn_key k;
  if (!ccn_get_key(env, inst, argv[1], &k) || (argv[3] != ccn_atom_ok && argv[3] != ccn_atom_ref)) {
    return enif_make_badarg(env);
  }
  int want_ref = argv[3] == ccn_atom_ref;
  ccn_prog *prog;
  if (enif_get_resource(env, argv[2], ccn_prog_type, (void **)&prog)) {
    return store_native(env, inst, &k, prog, want_ref);
  }
  ccn_value *src = ccn_ref_get(env, argv[2]);
  if (src != NULL) return store_shared(env, inst, &k, src, want_ref);
  uint64_t inline_max = atomic_load_explicit(&inst->inline_max, memory_order_relaxed);
  if (inline_max == CCACHE_UNBOUNDED || provably_small(env, argv[2], inline_max)) {
    return store_term(env, inst, &k, argv[2], 0, want_ref);
  }
  return enif_schedule_nif(env, "put_dirty", ERL_NIF_DIRTY_JOB_CPU_BOUND, put_dirty, 4, argv);
}
ENTERED(put)
ERL_NIF_TERM ccn_nif_put(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  return put(env, argc, argv);
}

/* ---- fetch ---- */

/* Dirty: copy a value out of its reference term. */
static ERL_NIF_TERM copy_dirty(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_value *v = ccn_ref_get(env, argv[0]);
  atomic_fetch_add(&v->inst->copies_dirty, 1);
  return ccn_ok(env, enif_make_copy(env, v->term));
}

/* fetch(name, key, :copy | :ref) -> {:ok, value | ref} | {:error, :cache_miss} */
static ERL_NIF_TERM fetch_in(ErlNifEnv *env, ccn_instance *inst, const ERL_NIF_TERM argv[]) {
  ccn_key k;
  if (!ccn_get_key(env, inst, argv[1], &k) ||
      (argv[2] != ccn_atom_copy && argv[2] != ccn_atom_ref)) {
    return enif_make_badarg(env);
  }
  ccache_lease lease;
  int rc = ccn_fetch(inst, &k, &lease);
  if (rc == CCACHE_MISS) return enif_make_tuple2(env, ccn_atom_error, ccn_atom_cache_miss);
  if (rc != CCACHE_OK) return ccn_error_status(env, rc);
  const ccn_value *v = lease.closure;
  if (argv[2] == ccn_atom_copy && v->env != NULL &&
      v->ext_bytes <= atomic_load_explicit(&inst->inline_max, memory_order_relaxed)) {
    ERL_NIF_TERM t = enif_make_copy(env, v->term);
    ccache_lease_release(inst->c, &lease);
    atomic_fetch_add_explicit(&inst->per_slot[ccn_thread_slot()].copies_inline, 1,
                              memory_order_relaxed);
    return ccn_ok(env, t);
  }
  ERL_NIF_TERM ref = ccn_lease_ref(env, inst, &lease);
  if (ref == 0) return ccn_error_status(env, CCACHE_ENOMEM);
  /* a native entry's value is its reference, in both modes */
  if (argv[2] == ccn_atom_ref || v->env == NULL) return ccn_ok(env, ref);
  return enif_schedule_nif(env, "fetch_copy_dirty", ERL_NIF_DIRTY_JOB_CPU_BOUND, copy_dirty, 1,
                           &ref);
}
ENTERED(fetch)
ERL_NIF_TERM ccn_nif_fetch(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  return fetch(env, argc, argv);
}

/* ref_value(ref) -> {:ok, value}: a copy of a term value (dirty if large);
 * a native entry's reference is returned as it is. */
ERL_NIF_TERM ccn_nif_ref_value(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  ccn_value *v = ccn_ref_get(env, argv[0]);
  void *prog;
  if (v == NULL && enif_get_resource(env, argv[0], ccn_prog_type, &prog)) {
    return ccn_ok(env, argv[0]); /* a program term is its own value */
  }
  if (v == NULL) return enif_make_badarg(env);
  if (v->env == NULL) return ccn_ok(env, argv[0]);
  if (v->ext_bytes <= atomic_load_explicit(&v->inst->inline_max, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&v->inst->per_slot[ccn_thread_slot()].copies_inline, 1,
                              memory_order_relaxed);
    return ccn_ok(env, enif_make_copy(env, v->term));
  }
  return enif_schedule_nif(env, "ref_value_dirty", ERL_NIF_DIRTY_JOB_CPU_BOUND, copy_dirty, argc,
                           argv);
}

/* ref_info(term) -> {:term, ext_bytes} | :native for a reference; :native
 * for a program term (ccache_nif.h); :not_a_reference for anything else
 * (what get_or_compile/3 returns by copy). */
ERL_NIF_TERM ccn_nif_ref_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ccn_value *v = ccn_ref_get(env, argv[0]);
  void *prog;
  if (v == NULL && enif_get_resource(env, argv[0], ccn_prog_type, &prog)) return ccn_atom_native;
  if (v == NULL) return enif_make_atom(env, "not_a_reference");
  if (v->env == NULL) return ccn_atom_native;
  return enif_make_tuple2(env, ccn_atom_term, enif_make_uint64(env, v->ext_bytes));
}
