/* Internals shared by the fetcher*.c and fsess*.c files; not for inclusion
 * elsewhere.
 *
 * fetcher.c        a partition: life cycle, the Kafka error policy;
 * fetcher_meta.c   a partition's leader and source identity, offsets,
 *                  OFFSET_OUT_OF_RANGE;
 * fetcher_data.c   a partition's records: parse, map, append;
 * fsess.c          the pool, sessions, groups, moving partitions;
 * fsess_conn.c     a session's connection: connect, send, receive, errors;
 * fsess_req.c      requests: choosing, encoding, ApiVersions;
 * fsess_dirty.c    the members a Fetch looks at (dirty list, index);
 * fsess_resp.c     Metadata, ListOffsets and Fetch answers, partition by
 *                  partition.
 */
#ifndef KM_DATAPLANE_FETCHER_PVT_H
#define KM_DATAPLANE_FETCHER_PVT_H

#include "dataplane/fetch/fsess.h"

#define KM_FETCHER_CLIENT_ID "kmirror"
#define KM_FETCHER_SW_VERSION "0.1.0"
/* Bytes of a Fetch response around its records: header, the first topic
 * name (<= 249) and partition fields, aborted-transaction count ... */
#define KM_FETCHER_RESP_OVERHEAD 1024u
/* ... and for each further partition (its own topic at worst). */
#define KM_FETCHER_PART_OVERHEAD 320u
/* Smallest receive budget a pool accepts. */
#define KM_FETCHER_BUDGET_MIN (16u * 1024)
/* MaxBytes is never halved below this after a stall. */
#define KM_FETCHER_MAX_BYTES_MIN 4096
/* Frames handled per session per step (STYLE 13). */
#define KM_FETCHER_FRAMES_PER_PUMP 16u

/* What the error policy does with a Kafka error code. */
enum km_fetcher_action {
	KM_FACT_REFRESH,	/* Metadata again, then the leader */
	KM_FACT_RETRY,		/* the same request after backoff */
	KM_FACT_OUT_OF_RANGE,	/* ListOffsets, then decide */
	KM_FACT_FAIL,
};

uint64_t km_fetcher_now_ms(void);

/* ---- fetcher.c: one partition ---- */

/** FAILED with a reason (first one wins); the partition leaves its session
 *  (km_fsess_pool_step) once no write of it reads a held frame. */
void km_fetcher_fail(struct km_fetcher *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** Every session step, per partition: transient trouble that lasted
 *  (cfg.unavailable_ms, or any in a retry attempt) FAILS it, transient. */
void km_fetcher_watch(struct km_fetcher *f, uint64_t now);

/** The backoff to wait now, doubled for next time (up to the maximum). */
uint32_t km_fetcher_backoff(struct km_fetcher *f);

/** Apply the error policy to a Kafka error code for this partition, from
 *  response `api` ("Fetch", ...) to request `req`. */
void km_fetcher_kafka_error(struct km_fetcher *f, const char *api,
			    enum km_freq req, int16_t err);

/** Needs its leader (Metadata) after delay_ms. */
void km_fetcher_need_leader(struct km_fetcher *f, uint32_t delay_ms);

/** Its session's connection is to its leader and versions are known:
 *  ListOffsets if the log is empty, else Fetch from its end. */
void km_fetcher_start(struct km_fetcher *f);

/** Resolve host to an IPv4 literal. @return 0, -EAGAIN, or -EINVAL. */
int km_fetcher_resolve(const struct km_fsess_pool *p, const char *host,
		       char ipv4[KM_FETCHER_IPV4_BYTES]);

/** An IPv4 literal, or "localhost". */
bool km_fetcher_literal_ipv4(const char *host,
			     char ipv4[KM_FETCHER_IPV4_BYTES]);

/* ---- fetcher_meta.c ---- */

/** Metadata m answered for f's topic: check the source's identity, record
 *  its leader. @return 0 (stats.leader is the leader, or f FAILED on an
 *  identity that changed: see f->failed), or the Kafka error to apply. */
int16_t km_fetcher_on_metadata(struct km_fetcher *f,
			       const struct km_metadata_resp *m);
/** Tell the owner (km_fetcher_set_touch); look: its session's watchdog
 *  and sweep have something to see too (an error, a state change). */
void km_fsess_dirty_add(struct km_fsess *s, struct km_fetcher *f);
static inline void km_fetcher_touch(struct km_fetcher *f, bool look)
{
	if (f->sess != NULL) {
		f->sess->fetch_due = true;
		km_fsess_dirty_add(f->sess, f);
	}
	if (look && f->sess != NULL)
		f->sess->look = f->sess->pre_due = true;
	if (f->touch != NULL)
		f->touch(f->touch_arg);
}

/** km_fetcher_pub_gen() moves on. */
void km_fetcher_published_changed(struct km_fetcher *f);
/** Set km_fetcher_note() (kind KM_FNOTE_NONE with "": nothing to say). */
void km_fetcher_set_note(struct km_fetcher *f, enum km_fetcher_note_kind kind,
			 const char *text);
/** Its ListOffsets answer p (NULL: missing) to request req. */
void km_fetcher_on_listoffsets(struct km_fetcher *f,
			       const struct km_listoffsets_resp_part *p,
			       enum km_freq req, int16_t version);

/* ---- fetcher_data.c ---- */

/** True if f may be named in the next Fetch at time now. */
bool km_fetcher_fetchable(const struct km_fetcher *f, uint64_t now);
/** Its partition of a Fetch response: figures, error, or its records,
 *  which it then appends from the frame (in_frame). */
void km_fetcher_on_fetch(struct km_fetcher *f, const struct km_fetch_part *p,
			 const struct km_kframe_frame *fr);
/** Append more of its records; @return true once it is done with the
 *  frame (parsed, and every write of it finished). */
bool km_fetcher_drain(struct km_fetcher *f);
/** True while batches it handed to the log are being written. */
bool km_fetcher_appends_pending(const struct km_fetcher *f);

/* ---- fsess.c: the pool and its sessions ---- */

/** Attach a new partition to a session of its bootstrap list (or a new
 *  discovery session). @return 0 or -ENOSPC. */
int km_fsess_attach(struct km_fsess_pool *p, struct km_fetcher *f);
/** Metadata named f's leader (f->stats.leader) to session s: f stays
 *  (and starts) if s is that broker's session, else moves there. */
void km_fsess_route(struct km_fsess *s, struct km_fetcher *f);
/** f keeps failing on s's broker: ask another through discovery. */
void km_fsess_rotate(struct km_fetcher *f);
/** Start every partition waiting for the handshake. */
void km_fsess_start_waiting(struct km_fsess *s);

/* ---- fsess_conn.c: the connection ---- */

/** Connect now (the slot was just set up). */
void km_fsess_open(struct km_fsess *s);
/** Close the connection on purpose (the next one asks Metadata first, as
 *  every connection does); refresh: the cause may be a leader change, so a
 *  session that never had a good answer hands its partitions to
 *  discovery. */
void km_fsess_drop(struct km_fsess *s, bool refresh);
void km_fsess_protocol_error(struct km_fsess *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/** Fail every partition of s (a session-wide cause). */
void km_fsess_fail_all(struct km_fsess *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/** Count an error kind on every partition of s. */
void km_fsess_count(struct km_fsess *s, enum km_fetcher_err kind);
/** Connection work of a step: connect, timeouts, frames, the next
 *  request. @return 1 if something moved. */
int km_fsess_conn_step(struct km_fsess *s);
/** Send the next request if the connection is free. */
void km_fsess_send(struct km_fsess *s);
bool km_fsess_can_send(const struct km_fsess *s);
/** Connected, versions known, not closing. */
bool km_fsess_ready(const struct km_fsess *s);
/** The connection ended (on_close ran, no frame held): reset it. */
void km_fsess_conn_gone(struct km_fsess *s);
/** Forget what the request in flight asked of f. */
void km_fsess_unask(struct km_fetcher *f);

/* ---- fsess_req.c: requests ---- */

/** Start a request of api at version in s->req (next correlation id). */
void km_fsess_req_begin(struct km_fsess *s, struct km_wire_wr *w,
			int16_t api, int16_t version);
/** The request to send next, or KM_FREQ_NONE. */
enum km_freq km_fsess_choose(struct km_fsess *s, uint64_t now);
/** Encode request r into s->req. @return 0, or < 0. */
int km_fsess_encode(struct km_fsess *s, struct km_wire_wr *w, enum km_freq r);
void km_fsess_on_apiversions(struct km_fsess *s,
			     const struct km_kframe_frame *fr,
			     struct km_wire_rd *r);

/* ---- fsess_inc.c: KIP-227 fetch sessions ---- */
/** No session with the broker: the next Fetch is full (keep_id: it
 *  closes session fs_id, which the broker may still hold). */
void km_fsess_inc_reset(struct km_fsess *s, bool keep_id);
/** f leaves s: the next incremental Fetch forgets it. */
void km_fsess_inc_leave(struct km_fsess *s, struct km_fetcher *f);
/** The next Fetch may be incremental (a session open, no overflow). */
bool km_fsess_inc_possible(const struct km_fsess *s);
/** m names every partition asked (m->parts[i] is s->asked[i]'s), every
 *  member ready (from_dirty false) or those of the dirty list: make it
 *  the session's next Fetch, full or incremental (only what changed, and
 *  ForgottenTopicsData), and note what the broker's session will hold.
 *  @return 0, or 1: from_dirty, and it must be full (select again, every
 *  member). */
int km_fsess_inc_build(struct km_fsess *s, struct km_fetch_req *m,
		       int16_t version, bool from_dirty);
/** The Fetch km_fsess_inc_build made was never sent: the next is full. */
void km_fsess_inc_unsent(struct km_fsess *s);
/** 70, 71 or 106: the session is gone on the broker's side. */
bool km_fsess_inc_session_error(int16_t err);
/** The Fetch in flight was answered with this error: a new session. */
void km_fsess_inc_error(struct km_fsess *s, int16_t err);
/** ... or served, with this SessionId. */
void km_fsess_inc_answered(struct km_fsess *s, int32_t session_id);
/* ---- fsess_dirty.c: the members a Fetch looks at ---- */
/** FNV-1a of a topic name (the index's key with the partition). */
uint32_t km_fsess_name_hash(const char *name);
/** The member of s for topic (its hash) and partition, or NULL. */
struct km_fetcher *km_fsess_find(const struct km_fsess *s, const char *topic,
				 uint32_t name_hash, int32_t partition);
/** Remember that topic id is name's (Fetch v13 answers name ids). */
void km_fsess_topic_note(struct km_fsess *s, const uint8_t *id,
			 const char *name);
/** The name of the session's topic with this id, or NULL. */
const char *km_fsess_topic_name(const struct km_fsess *s, const uint8_t *id);
/** f's line is the broker's and f ready: off the dirty list. */
void km_fsess_dirty_clean(struct km_fsess *s, struct km_fetcher *f);
/** Every member on the dirty list (a walk). */
void km_fsess_dirty_all(struct km_fsess *s);
/** A member capped by a byte rate: every Fetch looks at every member. */
bool km_fsess_walk_all(const struct km_fsess *s);
/** f joins or leaves s's index and lists. */
void km_fsess_member_in(struct km_fsess *s, struct km_fetcher *f);
void km_fsess_member_out(struct km_fsess *s, struct km_fetcher *f);
/** An empty session's lists and index. */
void km_fsess_dirty_reset(struct km_fsess *s);

/* ---- fsess_resp.c: answers ---- */

void km_fsess_on_metadata(struct km_fsess *s, struct km_wire_rd *r);
void km_fsess_on_listoffsets(struct km_fsess *s, struct km_wire_rd *r);
/** @return true if the frame is now held (partitions appending). */
bool km_fsess_on_fetch(struct km_fsess *s, const struct km_kframe_frame *fr,
		       struct km_wire_rd *r);
/** Drain the partitions appending from the held frame; release it once
 *  all are done. @return 1 if something moved. */
int km_fsess_drain(struct km_fsess *s);

#endif
