/* options.h: the command line (options.c). */
#ifndef ONEDNN_SERVING_OPTIONS_H
#define ONEDNN_SERVING_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

/* The --layers range, stated the same way by --help and by the error. */
#define LAYERS_RANGE "1..L, L = num_hidden_layers in the config (30 for SmolLM2-135M)"

typedef struct options {
  int requests, decode, threads, layers, json, check, runtime_dims, strong_keys;
  uint64_t seed, max_items, ttl_ms, max_cost;
  const char *config;
} options;

/** Print the --help text on @p f. */
void usage(FILE *f);

/** Fill @p o from the command line; --help prints the usage and exits 0.
 *  @return 0, or -1 after naming the bad option on stderr. */
int parse_args(int argc, char **argv, options *o);

#endif
