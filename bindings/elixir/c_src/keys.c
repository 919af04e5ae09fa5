/* Keys: the 16-byte (fast, XXH3-128) and 32-byte (strong, BLAKE2b-256)
 * key binaries, the hash of a term's external format in either mode, and
 * the C calls of both modes behind one ccn_key.
 *
 * A cache opened with keys: :strong is a CCACHE_KEYS_STRONG cache: every
 * lookup compares all 256 bits, so a key term chosen by someone else
 * cannot be made to collide with another's (XXH3 is not collision-
 * resistant).  Its keys are 32-byte binaries from hash(); a 16-byte binary
 * is hashed here as a term, the same way, so no 128-bit key reaches a
 * strong cache as it is. */
#include <string.h>
#include "nif.h"

/* Keys longer than this are hashed on a dirty scheduler (XXH3 runs at
 * several GB/s, BLAKE2b at ~1 GB/s: 256 KiB is well under 1 ms). */
#define HASH_INLINE_MAX (256u * 1024u)

static const char key_tag[] = "ccache-elixir: term key";

/* Little-endian, whatever the host's order. */
static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The key of @p bytes (a term's external format) in the given mode. */
static int hash_ext(const unsigned char *data, size_t size, int strong, ccn_key *out) {
  ccache_fp fp;
  memset(out, 0, sizeof *out);
  if (strong) {
    ccache_fp_init_strong(&fp);
  } else {
    ccache_fp_init(&fp);
  }
  ccache_fp_str(&fp, key_tag, sizeof key_tag - 1);
  ccache_fp_bytes(&fp, data, size);
  return strong ? ccache_fp_final_strong(&fp, out) : ccache_fp_final(&fp, &out->key);
}

int ccn_strong_available(void) {
  ccn_key k;
  return hash_ext((const unsigned char *)"", 0, 1, &k);
}

/* The key a key term names in @p inst's mode: a binary of the mode's size
 * (16 fast, 32 strong) is the key itself; a binary of the other size is
 * hashed as a term, as CCache.key/2 does (so a strong cache never takes a
 * 128-bit key as it is); anything else is not a key (CCache hashes terms
 * before the call). */
int ccn_get_key(ErlNifEnv *env, const ccn_instance *inst, ERL_NIF_TERM term, ccn_key *out) {
  ErlNifBinary b;
  if (!enif_inspect_binary(env, term, &b)) return 0;
  memset(out, 0, sizeof *out);
  size_t own = inst->strong ? 32 : 16, other = inst->strong ? 16 : 32;
  if (b.size == own) {
    out->key.lo = get_le64(b.data);
    out->key.hi = get_le64(b.data + 8);
    if (inst->strong) {
      out->check.lo = get_le64(b.data + 16);
      out->check.hi = get_le64(b.data + 24);
    }
    return 1;
  }
  if (b.size != other) return 0;
  ErlNifBinary ext; /* the external format of the binary, as CCache.key/2 hashes it */
  if (!enif_term_to_binary(env, term, &ext)) return 0;
  int rc = hash_ext(ext.data, ext.size, inst->strong, out);
  enif_release_binary(&ext);
  return rc == CCACHE_OK;
}

static ERL_NIF_TERM make_key(ErlNifEnv *env, const ccn_key *k, int strong) {
  ERL_NIF_TERM t;
  unsigned char *p = enif_make_new_binary(env, strong ? 32 : 16, &t);
  put_le64(p, k->key.lo);
  put_le64(p + 8, k->key.hi);
  if (strong) {
    put_le64(p + 16, k->check.lo);
    put_le64(p + 24, k->check.hi);
  }
  return t;
}

/* hash(mode, ext_binary) -> the key: mode is a cache name (its key mode;
 * fast when no such cache is open), false (fast) or true (strong). */
static ERL_NIF_TERM hash_in(ErlNifEnv *env, const ERL_NIF_TERM argv[]) {
  ErlNifBinary b;
  if (!enif_inspect_binary(env, argv[1], &b)) return enif_make_badarg(env);
  int strong = argv[0] == ccn_atom_true;
  if (argv[0] != ccn_atom_true && argv[0] != ccn_atom_false) {
    const ccn_instance *inst = ccn_lookup(env, argv[0]); /* never freed; mode fixed */
    strong = inst != NULL && inst->strong;
  }
  ccn_key k;
  int rc = hash_ext(b.data, b.size, strong, &k);
  if (rc != CCACHE_OK) return ccn_error_status(env, rc);
  return make_key(env, &k, strong);
}

static ERL_NIF_TERM hash_dirty(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  return hash_in(env, argv);
}

ERL_NIF_TERM ccn_nif_hash(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifBinary b;
  if (!enif_inspect_binary(env, argv[1], &b)) return enif_make_badarg(env);
  if (b.size > HASH_INLINE_MAX) {
    return enif_schedule_nif(env, "hash_dirty", ERL_NIF_DIRTY_JOB_CPU_BOUND, hash_dirty, argc,
                             argv);
  }
  return hash_in(env, argv);
}

/* A program key no other program of @p inst has: the fast fingerprint of
 * a tag and a counter (the strong half repeats them: these keys are made
 * here, never chosen by a caller, so they need no digest). */
void ccn_program_key(ccn_instance *inst, const char *tag, uint64_t n, ccn_key *out) {
  ccache_fp fp;
  memset(out, 0, sizeof *out);
  ccache_fp_init(&fp);
  ccache_fp_str(&fp, tag, strlen(tag));
  ccache_fp_u64(&fp, n);
  ccache_fp_final(&fp, &out->key);
  if (inst->strong) {
    out->check.lo = n;
    out->check.hi = 0x6363616368652d65ull; /* "ccache-e" */
  }
}

/* ---- the C calls, in the cache's key mode ---- */

int ccn_fetch(ccn_instance *inst, const ccn_key *k, ccache_lease *lease) {
  return inst->strong ? ccache_fetch_strong(inst->c, k, lease)
                      : ccache_fetch(inst->c, k->key, lease);
}

int ccn_put(ccn_instance *inst, const ccn_key *k, void *closure, ccache_program *p) {
  return inst->strong ? ccache_put_strong(inst->c, k, closure, p)
                      : ccache_put(inst->c, k->key, closure, p);
}

int ccn_remove(ccn_instance *inst, const ccn_key *k) {
  return inst->strong ? ccache_remove_strong(inst->c, k) : ccache_remove(inst->c, k->key);
}

int ccn_program_intern(ccn_instance *inst, const ccn_key *pk, void *native, uint64_t cost,
                       ccache_program **out) {
  return inst->strong ? ccache_program_intern_strong(inst->c, pk, native, cost, out)
                      : ccache_program_intern(inst->c, pk->key, native, cost, out);
}

int ccn_program_fetch(ccn_instance *inst, const ccn_key *pk, ccache_program **out) {
  return inst->strong ? ccache_program_fetch_strong(inst->c, pk, out)
                      : ccache_program_fetch(inst->c, pk->key, out);
}
