/*
 * test_tier_disk.c - the directory tier: options and trust (the
 * directory's owner and mode), layout and round trip, bad entries, the size
 * cap and LRU with touch.  Its faults are in test_tier_disk_io.c, its
 * crashes in test_tier_disk_crash.c, the compile lock across caches and
 * processes in test_tier_disk_lock.c.
 */
#define _GNU_SOURCE 1

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ------------------------------------------------------------- options, trust */

static void options_and_trust(void **state) {
  (void)state;
  ccache_disk_options o;
  memset(&o, 0x5A, sizeof o);
  ccache_disk_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_null(o.dir);
  assert_true(o.max_bytes == CCACHE_UNBOUNDED);
  assert_int_equal(o.fsync, 0);
  assert_true(o.lock_poll_ms == 10 && o.lock_poll_max_ms == 100 && o.lock_wait_ms == 60000);
  assert_true(o.touch_interval_ms == 60000);
  ccache_disk_options_init(NULL);

  char *root = t_tempdir("trust");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/a/b/cache", root);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(NULL, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EINVAL); /* no dir */
  o.dir = "";
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EINVAL);
  o.dir = dir;
  assert_int_equal(ccache_tier_disk(&o, NULL), CCACHE_EINVAL);
  ccache_disk_options b = o;
  b.max_bytes = 0;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.lock_poll_ms = 0;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.lock_poll_max_ms = 5;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.size = sizeof b - 1;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  assert_null(t);

  /* Absent: created 0700, with its missing parents. */
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_OK);
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  char parent[1024];
  snprintf(parent, sizeof parent, "%s/a", root);
  assert_int_equal(stat(parent, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  ccache_tier_free(t);
  t = NULL;

  /* Writable by group, or by others: refused, naming the path. */
  const mode_t bad_modes[] = {0770, 0707, 0722};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(chmod(dir, bad_modes[i]), 0);
    assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EPERM);
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), dir));
    assert_non_null(strstr(ccache_error_detail(), "writable"));
  }
  assert_int_equal(chmod(dir, 0700), 0);

  /* Owned by another user.  CI runs as root, where permission bits prove
   * nothing: the check is the library's own, so chown to nobody (or, when
   * the test runs as nobody, to the uid below it: a chown to oneself
   * succeeds and changes nothing). */
  uid_t other = geteuid() == 65534 ? 65533 : 65534;
  char owned_by[48];
  snprintf(owned_by, sizeof owned_by, "owned by uid %u", (unsigned)other);
  if (chown(dir, other, other) == 0) {
    assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EPERM);
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), dir));
    assert_non_null(strstr(ccache_error_detail(), owned_by));
    assert_int_equal(chown(dir, geteuid(), getegid()), 0);
  } else {
    assert_int_not_equal(geteuid(), 0);
    print_message("(not root: cannot chown to nobody; CI, as root, checks another owner)\n");
  }

  /* A file where the directory should be: cannot be opened as one. */
  char file[1024];
  snprintf(file, sizeof file, "%s/file", root);
  t_spit(file, "x", 1);
  o.dir = file;
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EIO);
  assert_non_null(strstr(ccache_error_detail(), file));
  t_rmrf(root);
  free(root);
}

/* ------------------------------------------------------ layout, round trip */

static void round_trip_and_layout(void **state) {
  (void)state;
  char *dir = t_tempdir("layout");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.fsync = 1;
  ccache_tier *tier = NULL;
  assert_int_equal(ccache_tier_disk(&o, &tier), CCACHE_OK);
  ccache *c = t_cache_over(&t, &tc, 300, tier, T_DISK_TAG);
  assert_non_null(c);
  /* (a compile gives a program the id key.lo) */
  ccache_key keys[3] = {PK(1), PK(2), {3, 0x0123456789ABCDEFull}};
  for (int i = 0; i < 3; i++)
    assert_int_equal(t_goc(c, keys[i], &comp, CCACHE_OK), (int)keys[i].lo);
  assert_int_equal(comp.calls, 3);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_writes, 3);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);

  /* One file per program, at <dir>/v1/<tag hash>/<2 hex>/<32 hex>. */
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, keys[2], path, sizeof path);
  char want[1024];
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  snprintf(want, sizeof want, "%s/%s/01/0123456789abcdef0000000000000003", dir, ns);
  assert_string_equal(path, want);
  size_t len = 0;
  unsigned char *got = t_slurp(path, &len);
  assert_non_null(got);
  size_t elen;
  unsigned char *e = t_entry(keys[2], T_DISK_TAG, 3, 300, &elen);
  assert_int_equal(len, elen);
  /* Header and payload; the creation time (48..55) and so the checksum
   * differ, and the checksum is checked by loading it below. */
  assert_memory_equal(got, e, 48);
  assert_memory_equal(got + 56, e + 56, elen - 56 - 16);
  free(got);
  free(e);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char sub[1024];
  t_subdir_path(dir, T_DISK_TAG, keys[0], sub, sizeof sub);
  assert_int_equal(t_count_prefix(sub, ".tmp."), 0);
  snprintf(want, sizeof want, "%s/v1/lock", dir);
  assert_int_equal(stat(want, &st), 0);
  assert_int_equal(st.st_size, 0); /* byte-range locks never grow it */

  /* A new cache (a restart) loads all three without compiling. */
  ccache *c2 = t_cache_over(&t, &tc, 300, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c2);
  for (int i = 0; i < 3; i++)
    assert_int_equal(t_goc(c2, keys[i], &comp, CCACHE_OK), (int)keys[i].lo);
  assert_int_equal(comp.calls, 3);
  s = t_stats(c2);
  assert_int_equal(s.tier_hits, 3);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.tier_bytes_read, 3 * ccache__tier_entry_len(300));
  t_close(c2);
  assert_int_equal(tc.bad_loads, 0);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------------------- bad entries */

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static void thousand_bad_entries_load_nothing_bad(void **state) {
  (void)state;
  enum { N = 1000 };
  char *dir = t_tempdir("bad");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  assert_int_equal(comp.calls, N);

  /* Damage 3 of every 4: a flipped bit anywhere, a truncation anywhere, an
   * intact entry of another runtime tag; the 4th stays good. */
  uint64_t seed = 12345;
  int flipped = 0, cut = 0, foreign = 0;
  uint64_t cut_bytes = 0; /* shrunk behind the library's back */
  for (int i = 0; i < N; i++) {
    char path[1024];
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    size_t len;
    unsigned char *b = t_slurp(path, &len);
    assert_non_null(b);
    if (i % 4 == 0) {
      size_t at = lcg(&seed) % len;
      b[at] ^= (unsigned char)(1u << (lcg(&seed) % 8));
      t_spit(path, b, len);
      flipped++;
    } else if (i % 4 == 1) {
      size_t keep = lcg(&seed) % len;
      t_spit(path, b, keep);
      cut_bytes += len - keep;
      cut++;
    } else if (i % 4 == 2) {
      size_t elen;
      unsigned char *e = t_entry(PK(i), "another-runtime", i, 200, &elen);
      t_spit(path, e, elen);
      free(e);
      foreign++;
    }
    free(b);
  }

  t_codec tc2 = {0};
  t_compiler comp2 = {0};
  c = t_cache_over(&t, &tc2, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp2, CCACHE_OK), i);
  ccache_stats s = t_stats(c);
  assert_int_equal(tc2.bad_loads, 0); /* 0 loads of bad bytes */
  assert_int_equal(tc2.decodes, N - flipped - cut - foreign);
  assert_int_equal(s.tier_hits, N / 4);
  assert_int_equal(s.tier_corrupt, flipped + cut); /* foreign: never corrupt */
  assert_int_equal(s.tier_misses, flipped + cut + foreign);
  assert_int_equal(comp2.calls, flipped + cut + foreign);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);
  /* The running total followed removals (of the sizes found) and
   * replacements; only the bytes cut behind its back are unknown to it
   * (the cleaner's recount corrects such drift). */
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  size_t slen;
  unsigned char *sb = t_slurp(sizef, &slen);
  assert_int_equal(slen, 16);
  uint64_t total = 0;
  for (int i = 7; i >= 0; i--) total = total << 8 | sb[8 + i];
  free(sb);
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, N);
  assert_int_equal(total, t_tree_bytes + cut_bytes);

  /* Bad entries were removed and compiled again: now every one loads. */
  t_codec tc3 = {0};
  t_compiler comp3 = {0};
  c = t_cache_over(&t, &tc3, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp3, CCACHE_OK), i);
  assert_int_equal(comp3.calls, 0);
  assert_int_equal(t_stats(c).tier_hits, N);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* ---------------------------------------------------------------- size cap */

static void cap_holds_under_many_puts(void **state) {
  (void)state;
  enum { PAYLOAD = 64 * 1024, PUTS = 300 };
  const uint64_t cap = 2u << 20; /* 2 MiB: ~31 entries */
  char *dir = t_tempdir("cap");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_tier *tier = t_disk_tier(dir, cap, 60000);
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  const uint64_t entry = ccache__tier_entry_len(PAYLOAD);
  uint64_t most = 0;
  for (int i = 0; i < PUTS; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    /* The clean a put asked for runs on the cleaner thread: with it done
     * before the next put, one writer overshoots by one entry at most. */
    assert_true(ccache__disk_settle(tier, 30000));
    t_tree_scan(dir);
    if (t_tree_bytes > most) most = t_tree_bytes;
    assert_true(t_tree_bytes <= cap + entry);
  }
  /* It did clean (the puts total ~19 MiB), and down to 90 %: after a clean
   * at most 90 % of the cap plus the entries written since remain. */
  assert_true(most > cap - entry);
  assert_true(t_tree_entries < PUTS);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_writes, PUTS);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);
  /* The running total matches the directory. */
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  size_t len;
  unsigned char *b = t_slurp(sizef, &len);
  assert_int_equal(len, 16);
  uint64_t total = 0;
  for (int i = 7; i >= 0; i--) total = total << 8 | b[8 + i];
  free(b);
  t_tree_scan(dir);
  assert_int_equal(total, t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

static void cleaner_removes_least_recently_used_and_hits_refresh(void **state) {
  (void)state;
  enum { PAYLOAD = 1000 };
  const uint64_t e = ccache__tier_entry_len(PAYLOAD);
  const uint64_t cap = 10 * e + e / 2; /* 10 entries fit; 90 % is 9.45 */
  char *dir = t_tempdir("lru");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 60000), T_DISK_TAG);
  for (int i = 1; i <= 8; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  /* Ages: key i last used (100 - i) minutes ago; key 1 is the oldest. */
  char path[1024];
  for (int i = 1; i <= 8; i++) {
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    t_set_age(path, (100 - i) * 60);
  }
  /* A hit on key 1 with a 1-minute interval refreshes it; a hit on key 2
   * with a 10-hour interval does not (its age, 98 min, is under that). */
  c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  t_close(c);
  c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 36000000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  t_close(c);
  assert_int_equal(comp.calls, 8);
  /* Keys 9 and 10 fit; key 11 goes over the cap: the cleaner removes the
   * two least recently used (2 and 3), down to 9 entries <= 90 %. */
  ccache_tier *tier = t_disk_tier(dir, cap, 60000);
  c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  for (int i = 9; i <= 11; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    assert_true(ccache__disk_settle(tier, 30000));
  }
  t_close(c);
  struct stat st;
  for (int i = 1; i <= 11; i++) {
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    bool want = !(i == 2 || i == 3);
    if ((stat(path, &st) == 0) != want) fail_msg("key %d: present %d, want %d", i, !want, want);
  }
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 9);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(options_and_trust),
      cmocka_unit_test(round_trip_and_layout),
      cmocka_unit_test(thousand_bad_entries_load_nothing_bad),
      cmocka_unit_test(cap_holds_under_many_puts),
      cmocka_unit_test(cleaner_removes_least_recently_used_and_hits_refresh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
