/*
 * trust_keys.c - the trust object of ccache/trust.h: key files in the
 * `NAME:BASE64` form (libsodium's base64 and Ed25519 key generation), the
 * secret file's permission check, and key-pair generation.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/detail.h"
#include "tier/tier_trust.h"

#ifdef CCACHE_HAVE_SODIUM
#include <sodium.h>
#endif

/* A key file is one short line; anything longer is not a key. */
#define KEY_FILE_MAX 512

int ccache_trust_available(void) { return ccache__crypto_ready() ? 1 : 0; }

int ccache_trust_new(ccache_trust **out) {
  if (!out) return CCACHE_EINVAL;
  ccache_trust *t = calloc(1, sizeof *t);
  if (!t) return CCACHE_ENOMEM;
  *out = t;
  return CCACHE_OK;
}

static void wipe(void *p, size_t n);
static int no_sodium(const char *call);

int ccache__trust_clone(ccache_trust **out, const ccache_trust *src, bool keep_signer) {
  ccache_trust *t = NULL;
  int rc = ccache_trust_new(&t);
  if (rc != CCACHE_OK) return rc;
  memcpy(t, src, sizeof *t);
  if (!keep_signer) {
    wipe(t->sk, sizeof t->sk);
    t->has_signer = false;
  }
  *out = t;
  return CCACHE_OK;
}

int ccache_trust_set_not_before(ccache_trust *t, uint64_t unix_ms) {
  if (!t) return CCACHE_EINVAL;
  if (!ccache__crypto_ready()) return no_sodium("ccache_trust_set_not_before");
  t->not_before_ms = unix_ms;
  return CCACHE_OK;
}

static void wipe(void *p, size_t n) {
#ifdef CCACHE_HAVE_SODIUM
  sodium_memzero(p, n);
#else
  volatile unsigned char *v = p;
  while (n--) *v++ = 0;
#endif
}

void ccache_trust_free(ccache_trust *t) {
  if (!t) return;
  wipe(t, sizeof *t);
  free(t);
}

static int no_sodium(const char *call) {
  ccache__detail("%s: this build has no libsodium (install libsodium-dev and rebuild)", call);
  return CCACHE_ENOTSUP;
}

#ifdef CCACHE_HAVE_SODIUM
static bool name_ok(const char *s, size_t n) {
  if (n < 1 || n > CCACHE_TRUST_NAME_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void ccache__trust_key_id(const unsigned char pk[CCACHE__TRUST_PK],
                          unsigned char id[CCACHE__TRUST_ID]) {
  unsigned char h[32];
  crypto_generichash(h, sizeof h, pk, CCACHE__TRUST_PK, NULL, 0);
  memcpy(id, h, CCACHE__TRUST_ID);
}

/* "NAME:BASE64\n?" of exactly want bytes: the name into name, the key into
 * key.  false if it is not that. */
static bool parse_key(const char *text, size_t want, char name[CCACHE_TRUST_NAME_MAX + 1],
                      unsigned char *key) {
  const char *colon = strchr(text, ':');
  if (!colon || !name_ok(text, (size_t)(colon - text))) return false;
  size_t nlen = (size_t)(colon - text);
  const char *b64 = colon + 1;
  size_t blen = strlen(b64);
  if (blen && b64[blen - 1] == '\n') blen--;
  size_t got = 0;
  const char *end = NULL;
  if (sodium_base642bin(key, want, b64, blen, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) !=
          0 ||
      got != want || end != b64 + blen)
    return false;
  memcpy(name, text, nlen);
  name[nlen] = '\0';
  return true;
}

/* Why a key file's owner or mode is refused (NULL: fine).  Both kinds: a
 * regular file owned by the effective user or root, that group and others
 * cannot write (a root-owned 0644 public key is fine); a secret one also
 * unreadable by them. */
static const char *key_file_refusal(const struct stat *st, bool secret) {
  if (!S_ISREG(st->st_mode)) return "is not a regular file";
  if (st->st_uid != geteuid() && st->st_uid != 0)
    return "is owned by another user (a key file must be the effective user's or root's)";
  if (secret && (st->st_mode & 077))
    return "must not be readable or writable by group or others (chmod 600)";
  if (st->st_mode & 022) return "must not be writable by group or others (chmod 644)";
  return NULL;
}

/* The whole of a small file into buf (NUL-terminated), refused unless
 * key_file_refusal() passes.  Opened non-blocking: a FIFO at the path is
 * refused, never waited on. */
static int read_key_file(const char *call, const char *path, bool secret, char buf[KEY_FILE_MAX]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    ccache__detail("%s: %s: %s", call, path, strerror(errno));
    return CCACHE_EIO;
  }
  struct stat st;
  int rc = CCACHE_OK;
  const char *why = NULL;
  if (fstat(fd, &st) != 0) {
    ccache__detail("%s: %s: %s", call, path, strerror(errno));
    rc = CCACHE_EIO;
  } else if ((why = key_file_refusal(&st, secret)) != NULL) {
    ccache__detail("%s: %s (mode %04o, owner %u) %s", call, path, (unsigned)(st.st_mode & 07777),
                   (unsigned)st.st_uid, why);
    rc = CCACHE_EPERM;
  }
  /* A public key file given for the secret one (the usual mix-up: the
   * public file is the world-readable one) is read anyway, to say so. */
  bool mixup = rc == CCACHE_EPERM && secret && S_ISREG(st.st_mode) && st.st_size < KEY_FILE_MAX;
  if (mixup) rc = CCACHE_OK;
  size_t n = 0;
  while (rc == CCACHE_OK) {
    ssize_t k = read(fd, buf + n, KEY_FILE_MAX - 1 - n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      ccache__detail("%s: %s: %s", call, path, strerror(errno));
      rc = CCACHE_EIO;
    } else if (k == 0) {
      break;
    } else if ((n += (size_t)k) == KEY_FILE_MAX - 1) {
      ccache__detail("%s: %s is too long to be a key file", call, path);
      rc = CCACHE_EINVAL;
    }
  }
  buf[n] = '\0';
  close(fd);
  if (mixup) {
    char name[CCACHE_TRUST_NAME_MAX + 1];
    unsigned char pk[CCACHE__TRUST_PK];
    if (rc == CCACHE_OK && parse_key(buf, CCACHE__TRUST_PK, name, pk)) {
      ccache__detail(
          "%s: %s is a public key file (NAME:BASE64 of 32 bytes); the signing key is the "
          "secret file of the pair (closure-cache-keys generate NAME SECRET_FILE PUBLIC_FILE "
          "writes it with mode 0600)",
          call, path);
      rc = CCACHE_EINVAL;
    } else {
      rc = CCACHE_EPERM; /* the mode's detail stands */
    }
    sodium_memzero(buf, KEY_FILE_MAX);
  }
  return rc;
}

static int add_public(ccache_trust *t, const char *name, const unsigned char pk[CCACHE__TRUST_PK]) {
  for (uint32_t i = 0; i < t->n; i++)
    if (memcmp(t->keys[i].pk, pk, CCACHE__TRUST_PK) == 0) return CCACHE_OK;
  if (t->n >= CCACHE_TRUST_MAX_KEYS + (t->has_signer ? 1u : 0u)) {
    ccache__detail("ccache_trust: already %u trusted keys", (unsigned)CCACHE_TRUST_MAX_KEYS);
    return CCACHE_EINVAL;
  }
  ccache__trust_key *k = &t->keys[t->n++];
  snprintf(k->name, sizeof k->name, "%s", name);
  memcpy(k->pk, pk, CCACHE__TRUST_PK);
  ccache__trust_key_id(pk, k->id);
  return CCACHE_OK;
}

int ccache_trust_add_key(ccache_trust *t, const char *text) {
  if (!t || !text) return CCACHE_EINVAL;
  if (!ccache__crypto_ready()) return no_sodium("ccache_trust_add_key");
  char name[CCACHE_TRUST_NAME_MAX + 1];
  unsigned char pk[CCACHE__TRUST_PK];
  if (!parse_key(text, CCACHE__TRUST_PK, name, pk)) {
    ccache__detail("ccache_trust_add_key: not a public key (NAME:BASE64 of 32 bytes)");
    return CCACHE_EINVAL;
  }
  return add_public(t, name, pk);
}

int ccache_trust_add_key_file(ccache_trust *t, const char *path) {
  if (!t || !path) return CCACHE_EINVAL;
  if (!ccache__crypto_ready()) return no_sodium("ccache_trust_add_key_file");
  char buf[KEY_FILE_MAX];
  int rc = read_key_file("ccache_trust_add_key_file", path, false, buf);
  if (rc != CCACHE_OK) return rc;
  char name[CCACHE_TRUST_NAME_MAX + 1];
  unsigned char pk[CCACHE__TRUST_PK];
  if (!parse_key(buf, CCACHE__TRUST_PK, name, pk)) {
    ccache__detail(
        "ccache_trust_add_key_file: %s is not a public key file (NAME:BASE64 of 32 "
        "bytes)",
        path);
    return CCACHE_EINVAL;
  }
  return add_public(t, name, pk);
}

/* Whether sk's stored public half is the one its seed makes (into pk). */
static bool halves_match(const unsigned char sk[CCACHE__TRUST_SK],
                         unsigned char pk[CCACHE__TRUST_PK]) {
  unsigned char seed[32], sk2[CCACHE__TRUST_SK];
  bool ok = crypto_sign_ed25519_sk_to_seed(seed, sk) == 0 &&
            crypto_sign_ed25519_seed_keypair(pk, sk2, seed) == 0 &&
            sodium_memcmp(pk, sk + 32, CCACHE__TRUST_PK) == 0;
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk2, sizeof sk2);
  return ok;
}

int ccache_trust_set_signing_key_file(ccache_trust *t, const char *path) {
  if (!t || !path) return CCACHE_EINVAL;
  if (!ccache__crypto_ready()) return no_sodium("ccache_trust_set_signing_key_file");
  if (t->has_signer) {
    ccache__detail("ccache_trust_set_signing_key_file: a signing key is set already");
    return CCACHE_EINVAL;
  }
  char buf[KEY_FILE_MAX];
  int rc = read_key_file("ccache_trust_set_signing_key_file", path, true, buf);
  char name[CCACHE_TRUST_NAME_MAX + 1];
  unsigned char sk[CCACHE__TRUST_SK], pk[CCACHE__TRUST_PK];
  if (rc == CCACHE_OK && !parse_key(buf, CCACHE__TRUST_SK, name, sk)) {
    ccache__detail(
        "ccache_trust_set_signing_key_file: %s is not a secret key file (NAME:BASE64 "
        "of 64 bytes)",
        path);
    rc = CCACHE_EINVAL;
  }
  /* The secret key's second half is its public key: derive the public key
   * from the first half (the seed) and refuse a file whose halves differ
   * (every signature it made would be rejected, its own included). */
  if (rc == CCACHE_OK && !halves_match(sk, pk)) {
    ccache__detail("ccache_trust_set_signing_key_file: %s: the key's halves do not match", path);
    rc = CCACHE_EINVAL;
  }
  if (rc == CCACHE_OK) {
    snprintf(t->signer.name, sizeof t->signer.name, "%s", name);
    memcpy(t->signer.pk, pk, CCACHE__TRUST_PK);
    ccache__trust_key_id(pk, t->signer.id);
    memcpy(t->sk, sk, CCACHE__TRUST_SK);
    t->has_signer = true;
    rc = add_public(t, name, pk);
  }
  sodium_memzero(buf, sizeof buf);
  sodium_memzero(sk, sizeof sk);
  return rc;
}

/* Write "name:base64\n" to a new file of that mode; false with a detail. */
static bool write_new(const char *path, mode_t mode, const char *name, const unsigned char *key,
                      size_t klen) {
  char b64[sodium_base64_ENCODED_LEN(CCACHE__TRUST_SK, sodium_base64_VARIANT_ORIGINAL)];
  sodium_bin2base64(b64, sizeof b64, key, klen, sodium_base64_VARIANT_ORIGINAL);
  char line[KEY_FILE_MAX];
  int n = snprintf(line, sizeof line, "%s:%s\n", name, b64);
  sodium_memzero(b64, sizeof b64);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  bool ok = fd >= 0;
  if (ok && fchmod(fd, mode) != 0)
    ok = false; /* the umask may have narrowed it: fine, but
                                                  never widened */
  if (ok && write(fd, line, (size_t)n) != n) ok = false;
  if (ok && fsync(fd) != 0) ok = false;
  int err = errno;
  if (fd >= 0 && close(fd) != 0) ok = false;
  sodium_memzero(line, sizeof line);
  if (!ok) {
    ccache__detail("ccache_trust_generate: %s: %s", path, strerror(err));
    if (fd >= 0) unlink(path);
  }
  return ok;
}

int ccache_trust_generate(const char *name, const char *secret_path, const char *public_path) {
  if (!name || !secret_path || !public_path) return CCACHE_EINVAL;
  if (!ccache__crypto_ready()) return no_sodium("ccache_trust_generate");
  if (!name_ok(name, strlen(name))) {
    ccache__detail("ccache_trust_generate: a key name is 1..%u bytes of [A-Za-z0-9._-]",
                   (unsigned)CCACHE_TRUST_NAME_MAX);
    return CCACHE_EINVAL;
  }
  unsigned char pk[CCACHE__TRUST_PK], sk[CCACHE__TRUST_SK];
  crypto_sign_ed25519_keypair(pk, sk);
  int rc = CCACHE_OK;
  if (!write_new(secret_path, 0600, name, sk, sizeof sk))
    rc = CCACHE_EIO;
  else if (!write_new(public_path, 0644, name, pk, sizeof pk)) {
    unlink(secret_path);
    rc = CCACHE_EIO;
  }
  sodium_memzero(sk, sizeof sk);
  return rc;
}
#else
void ccache__trust_key_id(const unsigned char pk[CCACHE__TRUST_PK],
                          unsigned char id[CCACHE__TRUST_ID]) {
  (void)pk;
  memset(id, 0, CCACHE__TRUST_ID);
}

int ccache_trust_add_key(ccache_trust *t, const char *text) {
  if (!t || !text) return CCACHE_EINVAL;
  return no_sodium("ccache_trust_add_key");
}

int ccache_trust_add_key_file(ccache_trust *t, const char *path) {
  if (!t || !path) return CCACHE_EINVAL;
  return no_sodium("ccache_trust_add_key_file");
}

int ccache_trust_set_signing_key_file(ccache_trust *t, const char *path) {
  if (!t || !path) return CCACHE_EINVAL;
  return no_sodium("ccache_trust_set_signing_key_file");
}

int ccache_trust_generate(const char *name, const char *secret_path, const char *public_path) {
  if (!name || !secret_path || !public_path) return CCACHE_EINVAL;
  return no_sodium("ccache_trust_generate");
}
#endif
