/*
 * alarm.c - the sweeper's alarm: what wakes the sweeper thread early.
 *
 * The sweeper (sweeper.c) sleeps until the oldest entry's deadline, or for
 * good while there is none.  Two things change that deadline to an earlier
 * one: an insert into an empty table (table.c) and a new TTL (bounds.c).
 * Both ring here; the ring bumps a generation so a sweeper that was just
 * about to sleep notices it and looks again.  Kept on a floor below the table
 * so the table can ring without calling up into the sweeper.
 */
#include "core/internal.h"

int ccache__alarm_init(ccache *c) { return ccache__worker_init_with_mutex(&c->sw, &c->sw_mu); }

void ccache__alarm_destroy(ccache *c) { ccache__worker_destroy_with_mutex(&c->sw); }

void ccache__alarm_ring(ccache *c) {
  ccache__lock(&c->sw_mu);
  c->sw_gen++;
  ccache__worker_wake_locked(&c->sw);
  ccache__unlock(&c->sw_mu);
}
