/* Fetch session: mirror ONE source partition into a km_log (the first slice
 * of the mirror path, DESIGN.md data flow; R1, R6).
 *
 * Non-blocking, driven by the worker loop: km_uring_poll(), km_net_poll(),
 * then km_fetcher_step(). The session connects to the bootstrap address,
 * asks ApiVersions v0, Metadata v2 (leader, source cluster id), ListOffsets
 * v1 (earliest) when the log is empty (else resumes at the log end), then
 * Fetch v4 (read_uncommitted), one request in flight. Every whole batch of
 * the records span is km_batch_parse'd over the receive chain (a batch
 * split across receive buffers is fine; a partial last batch is skipped and
 * refetched), mapped (km_batch_map_pid, R1) and appended with
 * KM_ORIGIN_MIRROR straight from the receive buffers; the response frame is
 * released only once km_log_appended_offset() passes its last batch.
 *
 * Errors: a corrupt batch (KM_EBADCRC) is counted and refetched from its
 * offset; NOT_LEADER / LEADER_NOT_AVAILABLE / UNKNOWN_TOPIC / a lost
 * connection -> reconnect with backoff, resume from the log end;
 * OFFSET_OUT_OF_RANGE, a log error or R1's INT64_MAX -> FAILED + reason.
 *
 * Limits of this slice: the leader must be the bootstrap broker (a leader
 * elsewhere is reported FAILED); one Fetch in flight.
 */
#ifndef KM_DATAPLANE_FETCHER_H
#define KM_DATAPLANE_FETCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/kframe.h"
#include "dataplane/net.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

enum km_fetcher_state {
	KM_FETCHER_CONNECTING = 0, /* connecting, handshake, or backing off */
	KM_FETCHER_MIRRORING = 1,
	KM_FETCHER_FAILED = 2,
};

enum { KM_FETCHER_BURST = 256, KM_FETCHER_REQ_BYTES = 1024 };

/* Refetches of one corrupt batch before the session gives up (FAILED): a
 * transient corruption on the wire heals on refetch, a stored one never. */
#define KM_FETCHER_CORRUPT_MAX 5

struct km_fetcher_config {
	char host[64];		   /* bootstrap, IPv4 literal */
	uint16_t port;
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t partition;
	int32_t max_wait_ms;	   /* Fetch MaxWaitMs; 0: 50 */
	int32_t max_bytes;	   /* Fetch MaxBytes and partition max; 0: 1 MiB */
	uint32_t backoff_ms;	   /* first reconnect backoff; 0: 50 */
	uint32_t backoff_max_ms;   /* 0: 2000 */
};

struct km_fetcher_stats {
	uint64_t bytes;		   /* batch bytes appended */
	uint64_t batches;	   /* batches appended */
	uint64_t duplicates;	   /* batches the log skipped (below its end) */
	uint64_t corrupt;	   /* batches rejected (KM_EBADCRC, ...) */
	uint64_t reconnects;
	uint64_t fetches;	   /* Fetch responses handled */
};

enum km_fetch_phase {
	KM_FPH_IDLE = 0,	   /* backoff or about to connect */
	KM_FPH_CONNECT,
	KM_FPH_APIVERSIONS,
	KM_FPH_METADATA,
	KM_FPH_LISTOFFSETS,
	KM_FPH_FETCH,		   /* a Fetch in flight */
	KM_FPH_APPEND,		   /* batches of a response being appended */
	KM_FPH_FAILED,
};

/* Fields are private except through the accessors. */
struct km_fetcher {
	struct km_fetcher_config cfg;
	struct km_net *net;
	struct km_log *log;
	struct km_net_conn *conn;
	struct km_kframe kf;
	enum km_fetch_phase phase;
	enum km_fetcher_state state;
	char reason[160];
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t leader_id;
	int32_t corr;		   /* of the request in flight */
	int16_t api_key;
	int64_t next_offset;	   /* next offset to fetch */
	int64_t corrupt_offset;	   /* where the last corrupt batch sat */
	uint32_t corrupt_streak;   /* rejections there in a row */
	int64_t high_watermark;	   /* source HW, last Fetch */
	uint64_t retry_at_ms;
	uint32_t backoff_ms;
	bool send_busy;
	bool send_pending;	   /* phase's request waits for send_busy */
	bool want_reconnect;	   /* after the held frame is written */
	/* The Fetch response in progress. */
	const struct km_kframe_frame *frame;
	struct km_chain_cur rec_cur; /* next batch in the records span */
	uint32_t rec_left;
	struct km_batch batches[KM_FETCHER_BURST];
	uint32_t n_batches, n_done;
	int64_t wait_offset;	   /* release frame when appended > this */
	uint8_t req[KM_FETCHER_REQ_BYTES];
	struct km_fetcher_stats stats;
};

/**
 * Set up a session (nothing happens until km_fetcher_step).
 * @return 0, or -EINVAL (no host/topic).
 */
int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_net *net, struct km_log *log);

/**
 * Advance the session: timers, appends waiting for queue room, releasing
 * written frames, the next request. Call every loop turn.
 * @return 1 if something moved, 0 if idle, or -1 once FAILED or stopped.
 */
int km_fetcher_step(struct km_fetcher *f);

/** Abort the connection (reason "stopped"); the session then waits for
 *  on_close and for the writes of a held frame,
 *  and writes nothing more. Call and poll until km_fetcher_idle(). */
void km_fetcher_stop(struct km_fetcher *f);

/** True when no connection and no buffer is held (safe to destroy). */
bool km_fetcher_idle(const struct km_fetcher *f);

/** Drop the connection as if the peer had (tests: a cut mid-stream). */
void km_fetcher_cut(struct km_fetcher *f);

static inline enum km_fetcher_state
km_fetcher_get_state(const struct km_fetcher *f)
{
	return f->state;
}

static inline const char *km_fetcher_reason(const struct km_fetcher *f)
{
	return f->reason;
}

static inline const struct km_fetcher_stats *
km_fetcher_get_stats(const struct km_fetcher *f)
{
	return &f->stats;
}

static inline const char *km_fetcher_cluster_id(const struct km_fetcher *f)
{
	return f->cluster_id;
}

static inline int64_t km_fetcher_high_watermark(const struct km_fetcher *f)
{
	return f->high_watermark;
}

#ifdef __cplusplus
}
#endif

#endif
