/* A tiny NIF library that provides native programs through ccache_nif.h,
 * for the tests and the benchmark: a "program" is an affine function
 * x -> a * x + b held in malloc'd memory. */
#include <stdatomic.h>
#include <stdlib.h>
#include "ccache_nif.h"

typedef struct affine {
  int64_t a, b;
} affine;

static const ccache_nif_api *api;
static ErlNifResourceType *own_type; /* the baseline: a program held by this library itself */
static atomic_ulong destroyed;

static void destroy_affine(void *native, void *ctx) {
  (void)ctx;
  free(native);
  atomic_fetch_add(&destroyed, 1);
}

static int get_ab(ErlNifEnv *env, const ERL_NIF_TERM argv[], affine *out) {
  ErlNifSInt64 a, b;
  if (!enif_get_int64(env, argv[0], &a) || !enif_get_int64(env, argv[1], &b)) return 0;
  out->a = a;
  out->b = b;
  return 1;
}

/* compile(a, b) -> a program term (ccache_nif.h's make_program) */
static ERL_NIF_TERM compile(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  affine ab;
  if (!get_ab(env, argv, &ab)) return enif_make_badarg(env);
  affine *p = malloc(sizeof *p);
  ERL_NIF_TERM t;
  if (p == NULL) return enif_make_badarg(env);
  *p = ab;
  if (api->make_program(env, p, destroy_affine, NULL, sizeof *p, &t) != 0) {
    free(p);
    return enif_make_badarg(env);
  }
  return t;
}

/* run(ref_or_program, x) -> a * x + b */
static ERL_NIF_TERM run(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  void *native;
  ErlNifSInt64 x;
  if (api->get_native(env, argv[0], &native) != 0 || !enif_get_int64(env, argv[1], &x)) {
    return enif_make_badarg(env);
  }
  const affine *p = native;
  return enif_make_int64(env, p->a * x + p->b);
}

/* run_key(cache, key, x) -> a * x + b of the program cached under key
 * (api->lend: the fetch and the use in one NIF call); :cache_miss */
static ERL_NIF_TERM run_key(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  void *native;
  ErlNifSInt64 x;
  ccache_nif_loan loan;
  if (!enif_get_int64(env, argv[2], &x)) return enif_make_badarg(env);
  int rc = api->lend(env, argv[0], argv[1], &native, &loan);
  if (rc == 1) return enif_make_atom(env, "cache_miss");
  if (rc != 0) return enif_make_badarg(env);
  const affine *p = native;
  ERL_NIF_TERM r = enif_make_int64(env, p->a * x + p->b);
  api->give_back(&loan);
  return r;
}

/* own(a, b) -> this library's own resource (the baseline, no cache) */
static ERL_NIF_TERM own(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  affine ab;
  if (!get_ab(env, argv, &ab)) return enif_make_badarg(env);
  affine *p = enif_alloc_resource(own_type, sizeof *p);
  if (p == NULL) return enif_make_badarg(env);
  *p = ab;
  ERL_NIF_TERM t = enif_make_resource(env, p);
  enif_release_resource(p);
  return t;
}

/* run_own(resource, x) -> a * x + b: the native call alone */
static ERL_NIF_TERM run_own(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  affine *p;
  ErlNifSInt64 x;
  if (!enif_get_resource(env, argv[0], own_type, (void **)&p) ||
      !enif_get_int64(env, argv[1], &x)) {
    return enif_make_badarg(env);
  }
  return enif_make_int64(env, p->a * x + p->b);
}

static ERL_NIF_TERM destroyed_count(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  return enif_make_uint64(env, atomic_load(&destroyed));
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
  (void)priv;
  api = ccache_nif_api_get(env, info);
  own_type = enif_open_resource_type(env, NULL, "affine", NULL, ERL_NIF_RT_CREATE, NULL);
  return api == NULL || own_type == NULL;
}

static ErlNifFunc funcs[] = {
    {"compile", 2, compile, 0}, {"run", 2, run, 0},         {"own", 2, own, 0},
    {"run_own", 2, run_own, 0}, {"run_key", 3, run_key, 0}, {"destroyed", 0, destroyed_count, 0},
};

ERL_NIF_INIT(Elixir.CCacheTest.Native, funcs, load, NULL, NULL, NULL)
