/* Private to dataplane/serve/frontend_group.c and frontend_offsets.c: not
 * for direct inclusion.
 *
 * The group APIs' tables are allocated once, by km_frontend_groups_init() (STYLE 9),
 * sized from common/km_limits.h and the front-end's limits, and reused by
 * every request: the handlers are synchronous and the worker runs one at a
 * time. What outlives a handler lives in its slot's reservation in the
 * connection's buffer (an OffsetCommit's response arrays, as a Produce's),
 * in a ticket of the connection's (a JoinGroup or SyncGroup waiting), or
 * in the write ring of frontend_offsets.c (a write of committed offsets
 * until it is durable).
 */
#ifndef KM_DATAPLANE_FRONTEND_GROUP_PVT_H
#define KM_DATAPLANE_FRONTEND_GROUP_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/serve/frontend_pvt.h"
#include "kafka/proto_group.h"

/* A JoinGroup or SyncGroup waiting for its answer: one per slot of every
 * connection, in fe_gmem.tickets, listed on its connection while used. */
struct fe_gticket {
	struct fe_conn *fc;
	uint32_t slot;
	bool used;
	struct fe_gticket *next, *prev;
};

/**
 * The bytes of a request field, contiguous: in place when one receive
 * buffer holds them, else copied to the front-end's staging area, which
 * holds a whole request, so every field of one fits. Valid until the
 * handler returns (the next km_frontend_span_reset()).
 * @return the bytes, or NULL when b->len <= 0.
 */
const uint8_t *km_frontend_span_bytes(struct km_frontend *fe, const struct km_chain *ch,
			     const struct km_group_bytes *b);

/** A handler starts with the whole staging area. */
void km_frontend_span_reset(struct km_frontend *fe);

#endif
