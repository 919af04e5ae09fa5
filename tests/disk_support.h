/*
 * disk_support.h - helpers shared by the directory-tier tests: tiers and
 * caches over a directory, the documented paths of entries and lock files,
 * file I/O, the entry files' bytes as the file system has them, and the
 * running total as the size file has it.
 */
#ifndef CCACHE_TEST_DISK_SUPPORT_H
#define CCACHE_TEST_DISK_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "tier_support.h"

#define T_DISK_TAG "disk-test-tag"

/* A directory tier (lock polls 1..8 ms, a 30 s wait); asserts success. */
ccache_tier *t_disk_tier(const char *dir, uint64_t max_bytes, uint64_t touch_ms);
/* A cache whose one tier is t (no cmocka: usable in children); NULL on error. */
ccache *t_cache_over(t_ctx *ctx, t_codec *tc, size_t payload, ccache_tier *t, const char *tag);
/* "<dir>/v1/<tag hash>", an entry's path under it, and its folder. */
void t_ns_path(const char *dir, const char *tag, char *out, size_t n);
void t_entry_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n);
void t_subdir_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n);
/* A whole file (caller frees; NULL if absent), and a file written whole. */
unsigned char *t_slurp(const char *path, size_t *len);
void t_spit(const char *path, const void *data, size_t len);
/* Files in dir whose name starts with prefix. */
int t_count_prefix(const char *dir, const char *prefix);
/* Bytes and number of entry files (32 hex names; temp files excluded). */
extern uint64_t t_tree_bytes;
extern int t_tree_entries;
void t_tree_scan(const char *dir);
/* Set a file's atime and mtime to seconds_ago. */
void t_set_age(const char *path, time_t seconds_ago);
/* The total in <dir>/v1/size (asserts it is 16 bytes). */
uint64_t t_size_total(const char *dir);
/* The documented compile lock of k: its folder's lock file and byte. */
void t_lock_file_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n);
uint64_t t_lock_byte(ccache_key k);
/* Whether someone holds k's compile lock (asked through our own description). */
bool t_key_locked(const char *dir, const char *tag, ccache_key k);

#endif
