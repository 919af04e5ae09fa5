/*
 * closure-cache-keys - make the key files of signed tier entries
 * (ccache/trust.h).
 *
 *   closure-cache-keys generate NAME SECRET_FILE PUBLIC_FILE
 *
 * writes a new Ed25519 key pair: SECRET_FILE (mode 0600, for writers:
 * CLOSURE_CACHE_SIGNING_KEY_FILE or ccache_trust_set_signing_key_file())
 * and PUBLIC_FILE (for every reader and writer: CLOSURE_CACHE_TRUSTED_KEYS
 * or ccache_trust_add_key_file()).  Neither file may exist already.
 * Exit status 0 on success, 1 on a failure (the reason on stderr), 2 on a
 * usage error.
 */
#include <stdio.h>
#include <string.h>

#include <ccache.h>

static int usage(void) {
  fprintf(stderr, "usage: closure-cache-keys generate NAME SECRET_FILE PUBLIC_FILE\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 5 || strcmp(argv[1], "generate") != 0) return usage();
  int rc = ccache_trust_generate(argv[2], argv[3], argv[4]);
  if (rc != CCACHE_OK) {
    fprintf(stderr, "closure-cache-keys: %s\n", ccache_error_detail());
    return 1;
  }
  printf("secret key: %s (keep it private; for writers)\npublic key: %s (for every reader)\n",
         argv[3], argv[4]);
  return 0;
}
