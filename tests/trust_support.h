/*
 * trust_support.h - helpers shared by the signed-entry tests: key pairs in
 * a scratch directory, trust objects over them, a forged entry's checksum
 * recomputed, the key fixture, and children that report by exit status.
 * Built with TRUST_ON_MAIN (tests/run_on_main.sh), the same tests compile
 * against a library without ccache/trust.h: every trust object is NULL, so
 * what main does with the same bytes is what the test checks.
 */
#ifndef CCACHE_TEST_TRUST_SUPPORT_H
#define CCACHE_TEST_TRUST_SUPPORT_H

#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

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

/* The cmocka fixture of the directory-tier trust tests: a keys directory
 * and a cache directory, both scratch. */
typedef struct tr_fixture {
  char *keys, *dir;
} tr_fixture;
/* test_trust*.c: trust-keys and trust-cache, key pairs old, new, other. */
int tr_setup(void **state);
/* test_trust_edges*.c: edges-keys and edges-cache, key pairs old, new. */
int tr_edges_setup(void **state);
int tr_teardown(void **state);

/* In a forked child: exit 1 naming the first check that failed (cmocka's
 * asserts do not reach the parent). */
#define CHILD_CHECK(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "line %d: %s (detail: %s)\n", __LINE__, #cond, ccache_error_detail()); \
      _exit(1);                                                                              \
    }                                                                                        \
  } while (0)

/* fn(arg) in a forked child with a 20 s alarm; its exit status (128 + the
 * signal if one ended it). */
int tr_run_child(void (*fn)(const void *), const void *arg);

#endif
