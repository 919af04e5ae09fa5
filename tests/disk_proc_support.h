/*
 * disk_proc_support.h - helpers shared by the directory-tier tests that run
 * processes against one directory (test_tier_disk_faults*.c,
 * test_tier_disk_races*.c): the running test's children, killed by its
 * teardown; reads and waits bounded in time; tiers with a short lock wait,
 * raw ones among them (their ops called as the cache calls them); a fault
 * hook that pauses a child at a point or kills it there; the recorded total
 * checked against the entry files.
 */
#ifndef CCACHE_TEST_DISK_PROC_SUPPORT_H
#define CCACHE_TEST_DISK_PROC_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "disk_support.h"

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t t_mono_ms(void);

/* Children of the running test, killed by the teardown t_reap_kids even if
 * the test failed half-way (a stopped or paused child would keep ctest
 * waiting); the teardown also clears the tier's test hooks (fault point,
 * clock, temp-name word). */
extern pid_t t_kids[8];
int t_reap_kids(void **state);

/* Read exactly n bytes from fd within ms; false on timeout or EOF. */
bool t_read_within(int fd, void *buf, size_t n, uint64_t ms);
/* waitpid within ms: the exit status, 128 + signal, or -1 (then killed). */
int t_wait_within(pid_t pid, uint64_t ms);

/* A directory tier (lock polls 1..8 ms, a 2 s wait, io_lock_ms for the size
 * file's lock); NULL on failure (no cmocka: usable in children). */
ccache_tier *t_disk_tier_io(const char *dir, uint64_t max_bytes, uint64_t io_lock_ms);
/* The same, attached to T_DISK_TAG's namespace: its raw ops are what the
 * cache calls.  t_raw_tier: io_lock_ms 10 s (a loaded machine, sanitizers). */
ccache_tier *t_raw_tier_io(const char *dir, uint64_t max_bytes, uint64_t io_lock_ms);
ccache_tier *t_raw_tier(const char *dir, uint64_t max_bytes);
/* A raw put of len bytes (len <= 4096) under k. */
int t_raw_put(ccache_tier *t, ccache_key k, size_t len);

/* The fault hook of a child started by t_start_child: at t_pause_point, the
 * first time (t_paused is set then), it tells the parent (t_pause_w) and
 * waits (at most 60 s) for its go (t_pause_r); at t_die_point, it dies at
 * once (SIGKILL: no cleanup of any kind). */
extern const char *t_pause_point, *t_die_point;
extern int t_pause_w, t_pause_r;
extern _Atomic int t_paused;
/* Fork a child running fn(dir) with the hook armed; the pipes connect its
 * pauses to the parent (*to_child: write one byte to let it go on). */
pid_t t_start_child(int (*fn)(const char *), const char *dir, int *from_child, int *to_child);

/* Fork a child that takes the size file's byte lock as a writer does and
 * stops itself there (SIGSTOP: as by ^Z, a debugger or a cgroup freezer).
 * Returns its pid (-1 if fork failed); *held is true once the child said,
 * within ready_ms, that it holds the lock.  The caller puts the pid in
 * t_kids so the teardown kills it. */
pid_t t_stop_holding_size_lock(const char *dir, uint64_t ready_ms, bool *held);

/* The total in the size file equals the entry files' bytes (printed with
 * what). */
void t_total_is_exact(const char *dir, const char *what);

#endif
