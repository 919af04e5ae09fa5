/**
 * @file ccache/trust.h
 * @brief Signed tier entries: signing keys, trusted keys, key files.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TRUST_H
#define CCACHE_CCACHE_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Signed tier entries
 *
 * Without a trust object a cache opens over a tier that others can write
 * (Redis) only with CCACHE_TRUST_UNSIGNED (ccache_config::trust_flags):
 * safe by default, ccache_open() is CCACHE_EINVAL otherwise (see
 * ccache/tier.h).  With one (ccache_config::trust), every entry read from
 * any tier must carry an Ed25519 signature by a trusted key before the
 * codec sees a byte of it, and before it is copied into a tier above.
 *
 * **Roles.**  A cache whose trust object has a signing key is a *writer*:
 * it signs every entry it stores and takes compile leases as before.  One
 * with trusted keys only is a *reader*: it never takes a compile lease and
 * never publishes what it compiles (ccache_stats::tier_unpublished); it
 * waits for another process's compile only while that process holds a
 * lease whose value carries a token a trusted key signed (for a backend
 * that can show its lease values: the Redis tier), and otherwise compiles
 * at once.  A writer trusts its own key's public half, plus the keys added.
 *
 * **What a signature covers.**  A domain string, the entry format version,
 * the whole entry header (program key, with a strong cache's check half;
 * runtime-tag digest; payload length; creation time), the signer's key id,
 * the *namespace digest* (BLAKE2b-256 of the format, the key mode, the
 * whole runtime tag and the tier's scope: the Redis tier's key prefix,
 * ccache_tier_ops::scope) and the BLAKE2b-256 digest of the payload; never
 * the XXH3 checksum.  So an entry copied to another prefix, runtime tag or
 * key mode does not verify there; signed lease tokens bind the same
 * digest.  Entries signed by 0.1 (before the namespace digest) are
 * rejected, not accepted for a while: the first writer that misses on one
 * replaces it; upgrade writers before readers, as below.  An
 * entry that is unsigned, signed by a key not trusted, or whose signature
 * does not verify is *rejected*: counted in ccache_stats::tier_rejected,
 * never decoded, never copied to another tier, and the program compiles
 * (never a failed fetch).  Trust is local configuration, so a rejected
 * entry is never deleted (during a key rotation it may be another
 * process's valid entry); a writer that compiles after a rejection stores
 * its own signed entry over it.
 *
 * **Rotation.**  Add the new key's public file to every reader and writer,
 * then give writers the new signing key, then, once the old entries are
 * gone or re-signed, remove the old key from the trusted lists.  During a
 * rotation writers trust both keys.
 *
 * **Rollout.**  Signers first, then readers that require signatures: a
 * cache with CCACHE_TRUST_UNSIGNED and no trust object still loads signed
 * entries (it does not check the signature), so writers can sign before
 * any reader verifies; then readers get trusted keys (and drop the flag).
 *
 * **Key files.**  One line of text, `NAME:BASE64` (standard base64 with
 * padding, then an optional newline), NAME 1..64 bytes of `[A-Za-z0-9._-]`:
 * the public key is 32 bytes, the secret key 64 (the Ed25519 seed and its
 * public half, as libsodium keeps it).  Key files are the roots of trust
 * and are checked like secrets: each must be a regular file (opened
 * non-blocking: a FIFO is refused, never waited on), owned by the
 * effective user or root, and not writable by group or others (a
 * root-owned 0644 public key is fine); a secret key file also has no
 * permission bits for group or others (mode 0600 or 0400), and its public
 * half must be the one its seed makes.  Anything else is refused.  Make a pair with ccache_trust_generate() or the
 * installed tool `closure-cache-keys generate NAME SECRET_FILE PUBLIC_FILE`.
 *
 * Built only with libsodium (Debian: libsodium-dev; CMake CCACHE_SODIUM).
 * Without it every key call returns CCACHE_ENOTSUP and a config with a
 * trust object is CCACHE_ENOTSUP at ccache_open(): never "accept
 * everything".
 * @{ */

/** Most trusted public keys one trust object holds. */
#define CCACHE_TRUST_MAX_KEYS 16u
/** Longest key name, in bytes. */
#define CCACHE_TRUST_NAME_MAX 64u

/** A signing key and a set of trusted public keys (opaque). */
typedef struct ccache_trust ccache_trust;

/**
 * @brief Whether this build can sign and verify (libsodium is in it and
 * initialised).
 * @return 1 or 0.  Thread-safe.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_available(void);

/**
 * @brief Make an empty trust object.
 * @param out receives it, owned by the caller (free with
 *        ccache_trust_free()); untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL out); CCACHE_ENOMEM.  Thread-safe.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_new(ccache_trust **out);

/**
 * @brief Free a trust object (its secret key is wiped first).
 * @param t from ccache_trust_new(), or NULL (no-op).  Caches opened with it
 *        keep their own copies, so it may be freed right after
 *        ccache_open().  Not to be called concurrently with other use of @p t.
  * @ingroup advanced
 */
CCACHE_API void ccache_trust_free(ccache_trust *t);

/**
 * @brief Set the signing key from a secret key file (makes caches opened
 * with @p t writers).  Its public half becomes trusted too.
 * @param t the trust object.
 * @param path the secret key file, NUL-terminated; not kept.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL argument; a file that is not one
 *         `NAME:BASE64` line of a 64-byte key, or whose stored public half
 *         is not the one its seed makes; a signing key already set; a
 *         public key file, whatever its mode: the detail says so);
 *         CCACHE_EPERM (not a regular file, owned by another user than the
 *         effective one or root, or readable or writable by group or
 *         others: the detail names the path, its mode and owner); CCACHE_EIO (cannot be opened or
 *         read); CCACHE_ENOTSUP (built without libsodium).  The detail is
 *         ccache_error_detail().  Not thread-safe on one @p t.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_set_signing_key_file(ccache_trust *t, const char *path);

/**
 * @brief Trust a public key given as text (`NAME:BASE64` of 32 bytes).
 * @param t the trust object.
 * @param text the key, NUL-terminated (a trailing newline is allowed); not
 *        kept.
 * @return CCACHE_OK (a key already trusted is not added twice);
 *         CCACHE_EINVAL (NULL argument, not a public key, or
 *         CCACHE_TRUST_MAX_KEYS keys already: the detail says which);
 *         CCACHE_ENOTSUP (built without libsodium).  Not thread-safe on
 *         one @p t.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_add_key(ccache_trust *t, const char *text);

/**
 * @brief Trust the public key in a file (see ccache_trust_add_key()).
 * @param t the trust object.
 * @param path the public key file, NUL-terminated; not kept.
 * @return as ccache_trust_add_key(), and CCACHE_EPERM (not a regular file,
 *         owned by another user than the effective one or root, or
 *         writable by group or others: the detail names the path, its mode
 *         and owner); CCACHE_EIO (cannot be opened or read: the detail names
 *         the path).  Not thread-safe on one @p t.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_add_key_file(ccache_trust *t, const char *path);

/**
 * @brief Refuse entries created before a time ("nothing signed before T"):
 * an older validly signed entry for the same key and runtime tag that
 * someone puts back is rejected like an unsigned one (tier_rejected).
 * Use it after a fix the runtime tag does not show (a compiler or codegen
 * bug fixed without a new tag): set T to when the fixed writers started,
 * so entries the broken ones signed never load again, while the fixed
 * ones' entries do.  The creation time is the signed header's (the
 * writer's wall clock, ms since the epoch).
 * @param t the trust object (for every cache opened with it; per trust
 *        object, not per key).
 * @param unix_ms the time, ms since 1970-01-01 UTC; 0 (default): none.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL @p t); CCACHE_ENOTSUP (built
 *         without libsodium).  Not thread-safe on one @p t.  Since 0.2.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_set_not_before(ccache_trust *t, uint64_t unix_ms);

/**
 * @brief Make a new key pair and write its two files.
 * @param name the key's name, 1..CCACHE_TRUST_NAME_MAX bytes of
 *        `[A-Za-z0-9._-]` (e.g. "build-farm-2026").
 * @param secret_path created with mode 0600, never over an existing file.
 * @param public_path created with mode 0644, never over an existing file.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL argument, bad name);
 *         CCACHE_EIO (a file exists already or cannot be written: the
 *         detail names it; nothing is left behind); CCACHE_ENOTSUP (built
 *         without libsodium).  Thread-safe.
  * @ingroup advanced
 */
CCACHE_API int ccache_trust_generate(const char *name, const char *secret_path,
                                     const char *public_path);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TRUST_H */
