/* Kafka request/response framing over one km_net connection (client side).
 *
 * Receive: the buffers on_recv delivers are queued as segments, never
 * copied. km_kframe_next() detects the next complete response frame
 * (km_wire_frame_parse) and hands it out as a chain view over the queued
 * segments; the frame is "held" (its bytes stay valid, and so does the chain
 * struct inside struct km_kframe_frame, which km_batch views point at) until
 * km_kframe_release(), which gives back to the backend every buffer wholly
 * before the frame's end. A buffer shared with the next frame is kept.
 * One frame is held at a time; frames are consumed in stream order.
 *
 * Send: km_kframe_req_begin() starts a request (size slot + header v0/v1 as
 * the table gives, next correlation id) in the caller's buffer;
 * km_kframe_req_send() closes the frame and queues it. The buffer must stay
 * valid until the send callback.
 *
 * Single-threaded (the worker's), allocation-free.
 */
#ifndef KM_DATAPLANE_KFRAME_H
#define KM_DATAPLANE_KFRAME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/chain.h"
#include "dataplane/net/net.h"
#include "kafka/proto.h"
#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KM_KFRAME_SEGS_MAX = 1024 };

/* A complete response frame: body is the first byte after the size prefix,
 * body_len the size field. */
struct km_kframe_frame {
	struct km_chain chain;	 /* over the held segments */
	struct km_chain_cur body;
	uint32_t body_len;
	struct km_chain_cur end; /* first byte after the frame */
};

struct km_kframe {
	struct km_net *net;
	uint32_t frame_bytes_max;
	int32_t next_corr;
	/* Segments queued, stream order; segs[0] holds the next unread byte at
	 * head_off. Private. */
	struct iovec segs[KM_KFRAME_SEGS_MAX];
	uint32_t ids[KM_KFRAME_SEGS_MAX];
	uint32_t n_segs;
	uint32_t head_off;
	uint64_t queued;	/* bytes of segs, head_off's included */
	bool held;
	struct km_kframe_frame cur;
	uint64_t bytes_in;
	uint64_t frames_in;
};

/** Set up for a new connection (correlation ids restart at 1). */
void km_kframe_init(struct km_kframe *k, struct km_net *net,
		    uint32_t frame_bytes_max);

/**
 * Queue the segments of one on_recv (the iovecs are copied, the bytes kept).
 * @return 0, or -ENOBUFS when KM_KFRAME_SEGS_MAX would be passed (the
 *         buffers are then released at once; the stream is broken: the
 *         caller must drop the connection).
 */
int km_kframe_push(struct km_kframe *k, const struct km_chain *data,
		   const uint32_t *buf_ids);

/**
 * The next complete frame, if no frame is held.
 * @return 1 with *out (held until km_kframe_release), 0 need more bytes (or a
 *         frame is held), or KM_EWIREFRAMELEN / KM_EWIREFRAMEMAX.
 */
int km_kframe_next(struct km_kframe *k, const struct km_kframe_frame **out);

/**
 * The size field of the next frame while none is held: what the peer
 * announced, before the frame is complete (a caller can tell a frame that
 * will never fit its buffers from one still arriving).
 * @return 1 with *size (the field, not counting its own 4 bytes), or 0 if a
 *         frame is held or fewer than 4 bytes are queued.
 */
int km_kframe_peek_size(const struct km_kframe *k, uint32_t *size);

/**
 * Pack the bytes queued after the held frame (all of them if none is held)
 * into as few buffers as they fill, and release the buffers emptied: a peer
 * that sends a large request in small pieces would otherwise hold a whole
 * buffer per piece. Bytes the held frame covers do not move. Every segment
 * must begin at its buffer's first byte, each buffer buf_bytes long (the
 * kernel backend's are). Each byte is copied about once however often this
 * runs: buffers already full are skipped.
 * @return how many buffers were released.
 */
uint32_t km_kframe_compact(struct km_kframe *k, uint32_t buf_bytes);

/** Done with the held frame: release the buffers wholly before its end. */
void km_kframe_release(struct km_kframe *k);

/** Release every queued buffer (connection gone; nothing may be held by a
 *  pending disk write any more). */
void km_kframe_reset(struct km_kframe *k);

/** Buffers queued (held frame and partial data). */
static inline uint32_t km_kframe_buffers(const struct km_kframe *k)
{
	return k->n_segs;
}

/**
 * Start a request in buf[0..cap): writer init, size slot, header with the
 * next correlation id (returned in *corr).
 * @return 0 or the writer's error.
 */
int km_kframe_req_begin(struct km_kframe *k, struct km_wire_wr *w, void *buf,
			size_t cap, int16_t api_key, int16_t api_version,
			const char *client_id, int32_t *corr);

/**
 * Close the frame and queue it on c. fn/arg as km_net_send.
 * @return 0, the writer's error, or km_net_send's.
 */
int km_kframe_req_send(struct km_kframe *k, struct km_net_conn *c,
		       struct km_wire_wr *w, km_net_sent_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
