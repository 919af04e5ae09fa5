/*
 * trust_support.h - helpers shared by the signed-entry tests: key pairs in
 * a scratch directory, trust objects over them, and a forged entry's
 * checksum recomputed.  Built with TRUST_ON_MAIN (tests/run_on_main.sh),
 * the same tests compile against a library without ccache/trust.h: every
 * trust object is NULL, so what main does with the same bytes is what the
 * test checks.
 */
#ifndef CCACHE_TEST_TRUST_SUPPORT_H
#define CCACHE_TEST_TRUST_SUPPORT_H

#include <stddef.h>

#include "tier_support.h"

#ifdef TRUST_ON_MAIN
typedef struct ccache_trust ccache_trust;
#define ccache_trust_free(t) ((void)(t))
#define SET_TRUST(cfg, t)    ((void)(t))
#else
#define SET_TRUST(cfg, t) ((cfg)->trust = (t))
#endif

/* A key pair named name in dir: dir/name.sec, dir/name.pub. */
void tr_keys(const char *dir, const char *name);
/* A trust object: signing key dir/<signer>.sec (NULL: none), trusting
 * dir/<k>.pub for each name of the NULL-terminated list. */
ccache_trust *tr_trust(const char *dir, const char *signer, const char *const *trusted);
/* Recompute an entry's XXH3-128 trailer after editing its bytes. */
void tr_reseal(unsigned char *blob, size_t len);
/* Rewrite an entry's header key (fast layout) and reseal it. */
void tr_move(unsigned char *blob, size_t len, ccache_key to);

#endif
