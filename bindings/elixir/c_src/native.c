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

__attribute__((visibility("default"))) extern const ccache_nif_api ccache_nif_api_v1;
const ccache_nif_api ccache_nif_api_v1 = {
    sizeof(ccache_nif_api),
    CCACHE_NIF_API_VERSION,
    make_program,
    ccn_prog_native,
};
