/**
 * @file ccache_nif.h
 * @brief For authors of other NIF libraries: hand a native program (a
 * pointer and its destructor) to the Elixir binding's cache, and get the
 * native pointer back from a reference that `CCache.fetch(key, as: :ref)`
 * returned.  Header-only; link with `-ldl` where dlopen() is not in libc.
 *
 * The binding's NIF library (`ccache_nif.so`) exports one table,
 * `ccache_nif_api_v1`.  Your library finds it at load time by the path of
 * that library, which `CCache.Nif.so_path/0` returns: pass it as
 * `load_info` (`:erlang.load_nif(your_path, CCache.Nif.so_path())`) and call
 * ccache_nif_api_get() from your `load` callback.  The binding's library
 * never unloads (the caches it opened live until the VM exits), so the
 * table and its functions stay valid for the life of the VM.
 *
 * How a native program enters and is used:
 *  1. your compile NIF (on a dirty scheduler: compiles are long) makes the
 *     native program and calls api->make_program(), which returns a term;
 *  2. Elixir code puts that term: `CCache.put(key, program)` (or returns
 *     `{:ok, program}` from the function given to `CCache.get_or_compile/3`,
 *     whose single-flight decides which process compiles);
 *  3. callers fetch a reference, `{:ok, ref} = CCache.fetch(key, as: :ref)`,
 *     and pass it to your run NIF, which calls api->get_native().
 * No term is copied on that path: the reference is one small term whatever
 * the size of the program.  Cheaper still, a run NIF that takes the key can
 * look the program up itself with api->lend() and api->give_back(): one NIF
 * call for the fetch and the use.
 *
 * Threading: the destroy callback you give runs exactly once, when the last
 * holder lets go (the cache after an eviction, a removal or an expiry, or
 * the last reference term being garbage collected), on whatever thread that
 * happens: a normal or dirty scheduler, or the cache's sweeper thread (not
 * a scheduler: no process environment).  It must not block, must not call
 * enif functions that need a process-bound environment, and must not
 * raise.  The native program may be used by many processes at once (one
 * reference, many schedulers): it must be safe to run concurrently, or your
 * run NIF must serialise it.
 */
#ifndef CCACHE_NIF_H
#define CCACHE_NIF_H

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <erl_nif.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of struct ccache_nif_api; a later version only appends fields. */
#define CCACHE_NIF_API_VERSION 1u

/** Name of the table the binding's library exports. */
#define CCACHE_NIF_API_SYMBOL "ccache_nif_api_v1"

/**
 * Destroys a native program given to make_program().
 * @param native the pointer given to make_program() (never NULL).
 * @param ctx the ctx given to make_program().
 * Runs exactly once, on any thread (see the file comment); no lock of the
 * cache is held.
 */
typedef void (*ccache_nif_destroy_fn)(void *native, void *ctx);

/** A loan of a cached native program (see ccache_nif_api::lend).  Caller-
 *  owned (stack is fine); zero-initialise it. */
typedef struct ccache_nif_loan {
  void *internal_[6]; /**< private */
} ccache_nif_loan;

/** The binding's functions for other NIF libraries. */
typedef struct ccache_nif_api {
  /** sizeof(struct ccache_nif_api) of the library that made the table. */
  uint32_t size;
  /** CCACHE_NIF_API_VERSION of the library that made the table. */
  uint32_t version;
  /**
   * Wrap a native program as a term that `CCache.put/3` accepts.
   * @param env the calling NIF's environment (process-bound).
   * @param native the native program (not NULL).  Ownership passes to the
   *        returned term on 0, stays with the caller otherwise.
   * @param destroy called once with (native, ctx) when the program dies
   *        (not NULL).
   * @param ctx passed to @p destroy; never dereferenced.
   * @param cost_bytes the caller's estimate of the native memory it holds,
   *        in bytes (kept as the program's cost; the binding sets no cost
   *        cap, so it is reported, never enforced).
   * @param out receives the term (valid in @p env).
   * @return 0; -1 on bad arguments or no memory (nothing taken).
   * If the term is never put, @p destroy runs when it is garbage collected.
   * Putting it under several keys shares one program (destroyed once).
   * Thread-safe.
   */
  int (*make_program)(ErlNifEnv *env, void *native, ccache_nif_destroy_fn destroy, void *ctx,
                      uint64_t cost_bytes, ERL_NIF_TERM *out);
  /**
   * The native pointer behind a reference.
   * @param env the calling NIF's environment.
   * @param term a reference from `CCache.fetch(key, as: :ref)` (or
   *        `CCache.get_or_compile/3` with `as: :ref`) of an entry that holds
   *        a native program, or a term make_program() returned.
   * @param native_out receives the native pointer; it stays valid while
   *        @p term is alive, i.e. at least until the calling NIF returns,
   *        even if the entry is evicted meanwhile.  Never free it.
   * @return 0; -1 if @p term is none of those (a reference to an Erlang
   *         term value, any other term): *native_out is left untouched.
   * Thread-safe; copies nothing, allocates nothing.
   */
  int (*get_native)(ErlNifEnv *env, ERL_NIF_TERM term, void **native_out);
  /**
   * Look @p key up in the cache named @p cache and lend its native program:
   * the fetch and the use in one NIF call, with no term made (the cheapest
   * path: one ccache lookup and its release around your call).
   * @param env the calling NIF's environment.
   * @param cache the cache's name (an atom, e.g. `CCache`).
   * @param key a 16-byte binary key (`CCache.key/1` of a term key).
   * @param native_out receives the native pointer, valid until
   *        ccache_nif_api::give_back() (even if the entry is evicted
   *        meanwhile).  Never free it.
   * @param loan caller-owned; filled on 0, zeroed otherwise.
   * @return 0 (give it back with give_back(), on any thread, before or after
   *         the NIF returns; holding it does not block anything, but keeps
   *         the program alive); 1 (no entry: a miss); -1 (no such cache, a
   *         bad key, or an entry that holds an Erlang term, not a native
   *         program).  Thread-safe; allocates nothing.
   */
  int (*lend)(ErlNifEnv *env, ERL_NIF_TERM cache, ERL_NIF_TERM key, void **native_out,
              ccache_nif_loan *loan);
  /** Give a loan back (a zeroed loan is a no-op); zeroes it.  Thread-safe. */
  void (*give_back)(ccache_nif_loan *loan);
} ccache_nif_api;

/**
 * Find the binding's table from a library path term (a binary or a
 * charlist, as `CCache.Nif.so_path/0` returns it).  The binding's library
 * must already be loaded (load `CCache.Nif` first; `CCache.Nif.so_path/0`
 * does).
 * @param env the environment of the `load` (or any NIF) call.
 * @param path the path term.
 * @return the table, or NULL (bad term, path longer than 4095 bytes, the
 *         library not loaded, an older table than version 1).
 */
static inline const ccache_nif_api *ccache_nif_api_get(ErlNifEnv *env, ERL_NIF_TERM path) {
  char buf[4096];
  ErlNifBinary bin;
  if (enif_inspect_binary(env, path, &bin)) {
    if (bin.size >= sizeof buf) return NULL;
    memcpy(buf, bin.data, bin.size);
    buf[bin.size] = '\0';
  } else if (enif_get_string(env, path, buf, sizeof buf, ERL_NIF_LATIN1) <= 0) {
    return NULL;
  }
  /* RTLD_NOLOAD: only a library the VM already loaded; the handle is kept
   * on purpose (that library never unloads). */
  void *handle = dlopen(buf, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL) return NULL;
  const ccache_nif_api *api = (const ccache_nif_api *)dlsym(handle, CCACHE_NIF_API_SYMBOL);
  if (api == NULL || api->version < 1u || api->size < sizeof(ccache_nif_api)) return NULL;
  return api;
}

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_NIF_H */
