/*
 * misuse.h - the opt-in checked build (cmake -DCCACHE_CHECKED=ON).
 *
 * Some caller errors cannot be refused cheaply: a lease released twice (a
 * copy released after the original), a lease never taken (stack garbage), a
 * cache used after ccache_close(), one closure pointer put under two keys,
 * one native program interned under two keys.  In the default build they are
 * undefined behaviour (documented in ccache.h) and cost nothing here: every
 * hook below is an empty macro.  In the checked build the library remembers
 * the open caches, the leases out (each gets a token), and the closures and
 * natives it owns, and detects each misuse: it prints exactly one line,
 *     ccache: <misuse> (<function>)
 * and aborts.  NULL closures and natives are exempt; pointers are forgotten
 * once destroyed.  The hit fast paths are off in the checked build.
 */
#ifndef CCACHE_MISUSE_H
#define CCACHE_MISUSE_H

#include <stdbool.h>

#include "ccache.h"

#ifdef CCACHE_CHECKED

void ccache__misuse_cache_opened(const ccache *c);
void ccache__misuse_cache_closed(const ccache *c);
/* Aborts unless c is an open cache. */
void ccache__misuse_cache(const ccache *c, const char *func);
/* After a call handed out *l (a lease on key): the lease gets a token (in
 * internal_[1]; the real word is kept aside), which remembers the key and
 * the taking thread. */
void ccache__misuse_lease_out(const ccache *c, ccache_lease *l, ccache_key key, const char *func);
/* Before a release: aborts if *l is not a lease out of c; else puts the real
 * word back. */
void ccache__misuse_lease_back(const ccache *c, ccache_lease *l, const char *func);
/* Before an insert of closure under key: aborts if the cache owns closure and
 * it is not the very pointer the entry under key holds (the one re-put
 * allowed); then remembers it. */
void ccache__misuse_closure_in(const ccache *c, const void *closure, bool reput, const char *func);
/* Before interning native under a new key: aborts if the cache already owns
 * native (under another key); then remembers it. */
void ccache__misuse_native_in(const ccache *c, const void *native, const char *func);
/* A closure or native the cache destroys (or gives up): forgotten. */
void ccache__misuse_gone(const ccache *c, const void *obj, char kind);
/* Program handles: one record per handle out (program, key, taking
 * thread).  A release, or a compile handing a handle to the cache, takes one
 * back and aborts when there is none (released twice, or released and then
 * handed over). */
void ccache__misuse_handle_out(const ccache *c, const void *p, ccache_key pkey, const char *func);
void ccache__misuse_handle_back(const ccache *c, const void *p, const char *func);
void ccache__misuse_handle_in(const ccache *c, const void *p, const char *func);
/* ccache_close() refused: one stderr line per lease and handle still out. */
void ccache__misuse_list_out(const ccache *c);

#define CCACHE__MISUSE(call) call
#else
#define CCACHE__MISUSE(call) ((void)0)
#endif

/* Entry points say which public call they are, for the message. */
#define CCACHE__CHECK_CACHE(c) CCACHE__MISUSE(ccache__misuse_cache((c), __func__))

#endif
