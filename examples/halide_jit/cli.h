/* cli.h: halide_jit's command line. */
#ifndef HJ_CLI_H
#define HJ_CLI_H

#include <stdint.h>
#include <stdio.h>

typedef struct hj_options {
  uint32_t layers;              /* --layers N (1..30) */
  uint32_t tokens;              /* --tokens T (1..1024) */
  uint32_t threads;             /* --threads N (1..64) */
  uint32_t repeat;              /* --repeat N (1..1000) */
  uint64_t seed;                /* --seed N (inputs only) */
  uint64_t max_items;           /* --max-items N (0: unbounded) */
  const char *cache_dir;        /* --cache-dir DIR, or NULL */
  const char *redis;            /* --redis HOST:PORT[,...], or NULL */
  const char *runtime_tag;      /* --runtime-tag S, or NULL */
  int json;                     /* --json */
  const char *signing_key;      /* --signing-key FILE: sign what it publishes, or NULL */
  const char *trusted_keys[16]; /* --trusted-key FILE, repeatable: load only what they signed */
  uint32_t n_trusted;
  int trust_unsigned; /* --trust-unsigned: Redis without keys loads unsigned pipelines */
} hj_options;

/* 0: run; 1: --help was printed (exit 0); -1: one line was printed to
 * stderr (exit 2). */
int hj_parse_args(int argc, char **argv, hj_options *o);
void hj_usage(FILE *f);

#endif
