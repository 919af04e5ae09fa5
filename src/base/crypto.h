/*
 * crypto.h - libsodium, initialised once per process, for what needs a
 * cryptographic primitive (the strong fingerprints; the signed tier entries
 * will use the same switch).  A build without libsodium (CMake
 * CCACHE_SODIUM=OFF, or AUTO without libsodium-dev) compiles the same
 * calls, which then report that nothing is available.  No libsodium type
 * appears here.
 */
#ifndef CCACHE_BASE_CRYPTO_H
#define CCACHE_BASE_CRYPTO_H

#include <stdbool.h>

/* Whether libsodium is in this build and initialised (sodium_init() ran
 * once, successfully).  Thread-safe; the first call does the work. */
bool ccache__crypto_ready(void);

#endif
