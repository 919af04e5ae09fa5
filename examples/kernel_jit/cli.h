/* cli.h: kernel_jit's command line. */
#ifndef KJ_CLI_H
#define KJ_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Kernels a run needs by default: about 3 s of cold compiles on 2 cores. */
#define KJ_DEFAULT_KERNELS 40u

typedef struct kj_options {
  uint32_t kernels;         /* --kernels N */
  uint64_t seed;            /* --seed N (inputs only) */
  const char *runtime_tag;  /* --runtime-tag S, or NULL */
  const char *cache_dir;    /* --cache-dir DIR: the disk tier, or NULL */
  uint64_t cache_max_bytes; /* --cache-max-bytes N (needs --cache-dir); 0: unbounded */
  const char *redis;        /* --redis HOST:PORT[,HOST:PORT...]: the Redis tier, or NULL */
  int json;                 /* --json */
  int verbose;              /* --verbose: one line per kernel on stderr */
  uint32_t hold_after;     /* --hold-after K: pause after K kernels until EOF on stdin (0: never) */
  const char *signing_key; /* --signing-key FILE: sign what it publishes, or NULL */
  const char *trusted_keys[16]; /* --trusted-key FILE, repeatable: load only what they signed */
  uint32_t n_trusted;
  int trust_unsigned; /* --trust-unsigned: Redis without keys loads unsigned kernels */
} kj_options;

/* 0: run; 1: --help was printed (exit 0); -1: one line was printed to
 * stderr (exit 2). */
int kj_parse_args(int argc, char **argv, kj_options *o);

void kj_usage(FILE *f);

#endif
