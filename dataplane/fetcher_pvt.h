/* Internals shared by the fetcher*.c files; not for inclusion elsewhere.
 *
 * fetcher.c        life cycle, connections, sending, response dispatch,
 *                  the Kafka error policy;
 * fetcher_meta.c   ApiVersions, Metadata, ListOffsets, OFFSET_OUT_OF_RANGE;
 * fetcher_data.c   Fetch: request, response, parse, map, append, pipelining.
 */
#ifndef KM_DATAPLANE_FETCHER_PVT_H
#define KM_DATAPLANE_FETCHER_PVT_H

#include "dataplane/fetcher.h"

#define KM_FETCHER_CLIENT_ID "kmirror"
#define KM_FETCHER_SW_VERSION "0.1.0"
/* Bytes of a one-partition Fetch response around its records: header,
 * topic name (<= 249), partition fields, aborted-transaction count. */
#define KM_FETCHER_RESP_OVERHEAD 1024u
/* Smallest receive budget km_fetcher_init() accepts. */
#define KM_FETCHER_BUDGET_MIN (16u * 1024)
/* MaxBytes is never halved below this after a stall. */
#define KM_FETCHER_MAX_BYTES_MIN 4096
/* Frames handled per pump (STYLE 13). */
#define KM_FETCHER_FRAMES_PER_PUMP 16u

/* What the error policy does with a Kafka error code. */
enum km_fetcher_action {
	KM_FACT_REFRESH,	/* Metadata again, then the leader */
	KM_FACT_RETRY,		/* the same request after backoff */
	KM_FACT_OUT_OF_RANGE,	/* ListOffsets, then decide */
	KM_FACT_FAIL,
};

uint64_t km_fetcher_now_ms(void);

/** FAILED with a reason (first one wins); aborts the connection. */
void km_fetcher_fail(struct km_fetcher *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** Close the connection on purpose; reconnect after backoff (or at once if
 *  quick_reconnect is set). */
void km_fetcher_drop(struct km_fetcher *f);
void km_fetcher_protocol_error(struct km_fetcher *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** Ask for request r, sent once `delay_ms` has passed and the connection
 *  is free. */
void km_fetcher_want(struct km_fetcher *f, enum km_freq r,
		     uint32_t delay_ms);

/** The backoff to wait now, doubled for next time (up to the maximum). */
uint32_t km_fetcher_backoff(struct km_fetcher *f);

/** Apply the error policy to a Kafka error code for our partition, from
 *  response `api` ("Fetch", ...) to request `req`. */
void km_fetcher_kafka_error(struct km_fetcher *f, const char *api,
			    enum km_freq req, int16_t err);

/** The connection is to the leader and versions are known: ListOffsets if
 *  the log is empty, else Fetch from its end. */
void km_fetcher_start_fetching(struct km_fetcher *f);

/** True if the connection can carry the next request. */
bool km_fetcher_can_send(const struct km_fetcher *f);

/** Resolve host to an IPv4 literal. @return 0, -EAGAIN, or -EINVAL. */
int km_fetcher_resolve(const struct km_fetcher *f, const char *host,
		       char ipv4[KM_FETCHER_IPV4_BYTES]);

/** Start a request of api at version in f->req (next correlation id). */
void km_fetcher_req_begin(struct km_fetcher *f, struct km_wire_wr *w,
			  int16_t api, int16_t version);

/* fetcher_meta.c */
int km_fetcher_enc_apiversions(struct km_fetcher *f, struct km_wire_wr *w);
int km_fetcher_enc_metadata(struct km_fetcher *f, struct km_wire_wr *w);
int km_fetcher_enc_listoffsets(struct km_fetcher *f, struct km_wire_wr *w,
			       int64_t timestamp);
void km_fetcher_on_apiversions(struct km_fetcher *f,
			       const struct km_kframe_frame *fr,
			       struct km_wire_rd *r);
void km_fetcher_on_metadata(struct km_fetcher *f, struct km_wire_rd *r);
void km_fetcher_on_listoffsets(struct km_fetcher *f, struct km_wire_rd *r,
			       enum km_freq req);

/* fetcher_data.c */
int km_fetcher_enc_fetch(struct km_fetcher *f, struct km_wire_wr *w);
/** @return true if the frame is now held (appending), false if done. */
bool km_fetcher_on_fetch(struct km_fetcher *f, const struct km_kframe_frame *fr,
			 struct km_wire_rd *r);
/** Append more of the held frame; release it once written.
 *  @return true if it was released. */
bool km_fetcher_drain(struct km_fetcher *f);
/** True while batches of the held frame are being written. */
bool km_fetcher_appends_pending(const struct km_fetcher *f);

#endif
