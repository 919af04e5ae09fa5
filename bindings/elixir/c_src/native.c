/* The table other NIF libraries use through ccache_nif.h: wrap a native
 * program as a term, and read the native pointer back from a reference. */
#include <string.h>
#include "ccache_nif.h"
#include "nif.h"

void ccn_prog_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  ccn_prog *p = obj;
  if (p->handle != NULL) {
    ccache_program_release(p->inst->c, p->handle);
    ccn_unhold(p->inst);
  } else if (p->pending != NULL) {
    p->pending->destroy(p->pending->native, p->pending->ctx);
    enif_free(p->pending);
  }
  if (p->lock != NULL) enif_mutex_destroy(p->lock);
}

static int make_program(ErlNifEnv *env, void *native, ccache_nif_destroy_fn destroy, void *ctx,
                        uint64_t cost_bytes, ERL_NIF_TERM *out) {
  if (env == NULL || native == NULL || destroy == NULL || out == NULL) return -1;
  ccn_native *n = enif_alloc(sizeof *n);
  if (n == NULL) return -1;
  ccn_prog *p = enif_alloc_resource(ccn_prog_type, sizeof *p);
  if (p == NULL) {
    enif_free(n);
    return -1;
  }
  memset(p, 0, sizeof *p);
  p->lock = enif_mutex_create("ccache_program");
  if (p->lock == NULL) {
    enif_release_resource(p); /* its destructor sees nothing to destroy */
    enif_free(n);
    return -1;
  }
  n->native = native;
  n->destroy = destroy;
  n->ctx = ctx;
  p->pending = n;
  p->cost_bytes = cost_bytes;
  *out = enif_make_resource(env, p);
  enif_release_resource(p);
  return 0;
}

int ccn_prog_native(ErlNifEnv *env, ERL_NIF_TERM term, void **native_out) {
  ccn_value *v = ccn_ref_get(env, term);
  ccn_prog *p;
  const ccn_native *n = NULL;
  if (v != NULL) {
    if (v->native == NULL) return -1; /* a term value */
    n = ccache_program_native(v->native);
  } else if (enif_get_resource(env, term, ccn_prog_type, (void **)&p)) {
    /* pending or interned, the native never changes once made */
    enif_mutex_lock(p->lock);
    n = p->handle != NULL ? (const ccn_native *)ccache_program_native(p->handle) : p->pending;
    enif_mutex_unlock(p->lock);
  }
  if (n == NULL) return -1;
  *native_out = n->native;
  return 0;
}

/* A loan is the lease itself and its cache. */
typedef struct loan_parts {
  ccache_lease lease;
  ccn_instance *inst;
} loan_parts;
_Static_assert(sizeof(loan_parts) <= sizeof(ccache_nif_loan), "ccache_nif_loan too small");

static int lend(ErlNifEnv *env, ERL_NIF_TERM cache, ERL_NIF_TERM key, void **native_out,
                ccache_nif_loan *loan) {
  loan_parts *lp = (loan_parts *)loan;
  memset(loan, 0, sizeof *loan);
  ccn_key k;
  ccn_instance *inst = ccn_enter(env, cache);
  if (inst == NULL) return -1;
  if (!ccn_get_key(env, inst, key, &k)) {
    ccn_leave(inst);
    return -1;
  }
  int rc = ccn_fetch(inst, &k, &lp->lease);
  const ccn_native *n = rc == CCACHE_OK ? lp->lease.native : NULL;
  if (rc == CCACHE_OK && n == NULL) ccache_lease_release(inst->c, &lp->lease);
  if (n != NULL) ccn_hold(inst); /* the loan may outlive this call: give_back lets go */
  ccn_leave(inst);
  if (rc == CCACHE_MISS) return 1;
  if (n == NULL) return -1;
  lp->inst = inst;
  *native_out = n->native;
  return 0;
}

static void give_back(ccache_nif_loan *loan) {
  loan_parts *lp = (loan_parts *)loan;
  if (loan != NULL && lp->inst != NULL) {
    ccache_lease_release(lp->inst->c, &lp->lease);
    ccn_unhold(lp->inst);
  }
  if (loan != NULL) memset(loan, 0, sizeof *loan);
}

__attribute__((visibility("default"))) extern const ccache_nif_api ccache_nif_api_v1;
const ccache_nif_api ccache_nif_api_v1 = {
    sizeof(ccache_nif_api), CCACHE_NIF_API_VERSION, make_program, ccn_prog_native, lend, give_back,
};
