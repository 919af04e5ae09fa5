/*
 * crypto.c - one sodium_init() per process.  sodium_init() picks the
 * fastest implementation of each primitive for the CPU (BLAKE2b's AVX2 or
 * SSSE3 code, for instance) and is thread-safe itself, but it takes a mutex
 * on every call: a pthread_once in front keeps later calls to one load.
 */
#include "base/crypto.h"

#ifdef CCACHE_HAVE_SODIUM
#include <pthread.h>
#include <sodium.h>

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static bool crypto_ok;

static void crypto_init(void) { crypto_ok = sodium_init() >= 0; }

bool ccache__crypto_ready(void) {
  pthread_once(&crypto_once, crypto_init);
  return crypto_ok;
}
#else
bool ccache__crypto_ready(void) { return false; }
#endif
