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
 * Exit status 0 on success (and for --help), 1 on a failure (the reason on
 * stderr), 2 on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include <ccache.h>

/* The usage: on stdout with status 0 when asked for (--help, -h), on
 * stderr with status 2 after a usage error. */
static int usage(FILE *to, int status) {
  fprintf(to,
          "usage: closure-cache-keys generate NAME SECRET_FILE PUBLIC_FILE\n"
          "\n"
          "Writes a new Ed25519 key pair for signed tier entries:\n"
          "  SECRET_FILE  mode 0600, for the processes that write entries\n"
          "               (CLOSURE_CACHE_SIGNING_KEY_FILE)\n"
          "  PUBLIC_FILE  for every reader and writer (CLOSURE_CACHE_TRUSTED_KEYS)\n"
          "NAME is the key's name (letters, digits, '-', '_', '.').  Neither file may\n"
          "exist already.  Exit status: 0 done, 1 failed (the reason on stderr),\n"
          "2 usage error.\n");
  return status;
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
    return usage(stdout, 0);
  if (argc != 5 || strcmp(argv[1], "generate") != 0) return usage(stderr, 2);
  int rc = ccache_trust_generate(argv[2], argv[3], argv[4]);
  if (rc != CCACHE_OK) {
    fprintf(stderr, "closure-cache-keys: %s\n", ccache_error_detail());
    return 1;
  }
  printf("secret key: %s (keep it private; for writers)\npublic key: %s (for every reader)\n",
         argv[3], argv[4]);
  return 0;
}
