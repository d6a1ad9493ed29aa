/* Owner-side writer for local Produce: one per WRITABLE partition, on the
 * worker that owns the partition's log (DESIGN: one writer per partition).
 *
 * km_local_write_submit() copies one Produce partition's records from the
 * request's receive chain into memory the writer owns (the buffers go back
 * to the network at once), validates every record batch (km_batch_parse:
 * length, magic, CRC; then km_validate_batch: Kafka's LogValidator checks
 * that the header agrees with the records, compressed ones decompressed
 * into the config's km_inflate), refuses what a client may not write, and
 * appends the batches with KM_ORIGIN_CLIENT through km_log_append_burst(), which assigns their
 * offsets and runs Kafka's producer checks (R2). The appends happen in
 * km_local_write_poll(), in submit order, never inside submit: a segment
 * roll inside an append waits on the worker's ring and runs its other
 * completions, which must not find a caller (the front-end, on a network
 * callback) half-way through its own work. A write queue that is full is
 * retried on the next poll.
 *
 * The outcome is reported through the km_part_produced_fn given to submit,
 * always from km_local_write_poll() and never from inside submit, once:
 *   acks 0 or 1: the batches are appended (written, not yet synced);
 *   acks -1:     they are durable (km_log_durable_offset() passed the last
 *                one, R6); the writer queues km_log_flush() itself, so the
 *                answer never waits for the log's flush timer;
 *   or an error.
 * A duplicate (KM_EDUPLICATE: the producer resent a batch the log has) is
 * reported as success with the ORIGINAL batch's base offset, as Kafka does
 * (after the original is appended or durable, as acks asks).
 *
 * That copy is the only one a Produce's records get between the socket and
 * the disk, and it is needed: the receive buffers are one pool shared by
 * every connection of the worker (dataplane/net/net.h, Backpressure), and
 * the framing gives them back as soon as the request is handled, while the
 * log writes from the batch's memory until its write completes, after
 * rewriting baseOffset and the leader epoch in it. Holding the buffers
 * that long would stall reception on every connection. The log then
 * writes straight from the copy (no further copy). A Produce forwarded
 * from another worker was copied once already, out of that worker's
 * receive buffers, which only it may release: km_local_write_adopt()
 * takes that copy over instead of copying again.
 *
 * Memory: the copies live in one ring of mem_bytes, in submit order; each
 * is freed once the log no longer reads it (km_log_appended_offset() passed
 * its last batch) and its outcome was reported; adopted records are
 * released at the same point, and at most mem_bytes of them are held.
 * Everything is allocated by km_local_write_create() (STYLE 9).
 *
 * Threading: the owner thread only.
 */
#ifndef KM_DATAPLANE_LOCAL_WRITE_H
#define KM_DATAPLANE_LOCAL_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/chain.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_inflate;
struct km_log;
/* As dataplane/serve/part.h declares it (an identical typedef may repeat): only
 * the callback's type is needed here, so this header stays C++-clean. */
struct km_part_produced;
typedef void (*km_part_produced_fn)(void *arg,
				    const struct km_part_produced *res);

/* Batches one submit may hold. Kafka allows exactly one per partition from
 * Produce v3 ("ProduceRequest ... only allowed to contain exactly one record
 * batch"); a few more are accepted. Each costs ~96 B per pending slot. */
enum { KM_LOCAL_WRITE_BATCHES_MAX = 8 };

struct km_local_write_config {
	struct km_log *log;	   /* the partition's log; outlives the writer */
	uint32_t mem_bytes;	   /* records held at once; the largest
				    * accepted submit */
	uint32_t pending_max;	   /* submits not yet freed, >= 1 */
	uint32_t batch_bytes_max;  /* largest batch; 0: KM_BATCH_BYTES_MAX */
	struct km_inflate *inflate; /* scratch to validate compressed batches
				     * in, shared by the writers of one
				     * thread (a worker's); outlives the
				     * writer. NULL: the writer creates its
				     * own of KM_INFLATE_BYTES_MAX */
	bool txn_coordinated;	   /* a transaction coordinator answers this
				    * partition's producers: their
				    * transactional batches are accepted */
	bool coordinator_only;	   /* only the front-end's coordinators write
				    * here (an internal partition clients
				    * cannot produce to): batches are
				    * appended as Kafka's COORDINATOR origin
				    * (epoch checked, no sequence), as its
				    * group coordinator writes a
				    * TxnOffsetCommit's batch */
};

struct km_local_write_stats {
	uint64_t submits;
	uint64_t batches;	   /* batches appended */
	uint64_t bytes;		   /* batch bytes appended */
	uint64_t duplicates;	   /* batches answered with the original */
	uint64_t errors;	   /* submits reported with an error */
	uint64_t refused_full;	   /* submits refused: memory or slots full */
};

struct km_local_write; /* opaque */

/**
 * Create a writer for cfg->log.
 * @return 0 and *out, or -EINVAL (no log, mem_bytes or pending_max 0,
 *         batch_bytes_max above KM_BATCH_BYTES_MAX), -ENOMEM.
 */
int km_local_write_create(const struct km_local_write_config *cfg,
			  struct km_local_write **out);

/**
 * Free the writer. Outcomes not yet reported are dropped; adopted records
 * still held are released. The log must no longer read the copies: call it
 * after km_log_sync() or km_log_close().
 */
void km_local_write_destroy(struct km_local_write *lw);

/**
 * Take one Produce partition's records, len bytes of chain c from cur
 * (copied: the caller may release c's buffers on return), and validate
 * them; km_local_write_poll() appends them.
 * @param acks  0, 1 or -1 (any other value is -EINVAL).
 * @return 0 (done will run exactly once, from km_local_write_poll), or,
 *         with done never run:
 *         -EINVAL   len 0 or a bad acks value;
 *         KM_EBATCHMAX  len larger than mem_bytes (it can never fit);
 *         -ENOBUFS  memory or pending slots full now (retry later);
 *         the log's sticky error (km_log_error) once it failed.
 * Outcome codes done may report: 0; KM_EBATCHLEN, KM_EBATCHMAX,
 * KM_EBADMAGIC, KM_EBADCRC, KM_EBATCHHDR (a batch is malformed; nothing of
 * the submit is appended); KM_EBATCHCOUNT, KM_ERECOFFSET, KM_ERECORD,
 * KM_ERECCOUNT, KM_EVARINT, KM_EINFLATE, KM_EINFLATEMAX (a batch's header
 * disagrees with its records, see kafka/validate.h; nothing is appended); KM_EWIRETRUNC (the records end inside a batch);
 * -E2BIG (more than KM_LOCAL_WRITE_BATCHES_MAX batches); -EPERM (a control
 * batch, a transactional batch unless txn_coordinated, or a producer id
 * below -1: clients may not
 * write those here, see local_write.c); the producer-state codes
 * (KM_EOUTOFORDERSEQ, KM_EPRODUCERFENCED, KM_EINVALIDTXNSTATE,
 * KM_EPSTATEFULL); or the log's error (-ENOSPC, -EIO, KM_ESEGMENTS, ...).
 */
int km_local_write_submit(struct km_local_write *lw, const struct km_chain *c,
			  struct km_chain_cur cur, uint32_t len, int16_t acks,
			  km_part_produced_fn done, void *arg);

/**
 * Queue the transaction coordinator's COMMIT (commit) or ABORT marker of
 * producer_id at producer_epoch, in submit order after everything submitted
 * before it, appended with KM_ORIGIN_CONTROL (Kafka's COORDINATOR origin:
 * the epoch is checked, not the sequence) and reported as acks -1: once
 * durable, so the coordinator completes a transaction only when every
 * marker of it is on disk.
 * @return as km_local_write_submit(); the outcome may also be the producer
 *         state's refusal (KM_EPRODUCERFENCED for an older epoch).
 */
int km_local_write_marker(struct km_local_write *lw, int64_t producer_id,
			  int16_t producer_epoch, bool commit,
			  int32_t coordinator_epoch, int64_t timestamp_ms,
			  km_part_produced_fn done, void *arg);

/** Gives adopted records back (km_local_write_adopt()). */
typedef void (*km_local_write_release_fn)(void *records);

/**
 * As km_local_write_submit(), for records already copied out of the
 * receive buffers (a Produce forwarded by another worker): the writer
 * appends straight from records[0, len), which it may write into, and owns
 * them on success. release(records) runs on this thread once the log no
 * longer reads them: after the outcome was reported, or from
 * km_local_write_destroy(). On a negative return they stay the caller's.
 * @return as km_local_write_submit(); -ENOBUFS also while mem_bytes of
 *         adopted records are held.
 */
int km_local_write_adopt(struct km_local_write *lw, void *records,
			 uint32_t len, int16_t acks, km_part_produced_fn done,
			 void *arg, km_local_write_release_fn release);

/**
 * Append what was submitted (and what the write queue refused before),
 * report every finished submit, free copies the log is done with. Call
 * every loop turn, after km_uring_poll() and km_net_poll().
 * Bounded work per call (pending_max). A callback may call
 * km_local_write_submit().
 * @return the number of outcomes reported.
 */
int km_local_write_poll(struct km_local_write *lw);

/** Submits whose outcome is not reported yet, or whose copy the log is
 *  still writing. Once the log failed, the copies of reported submits are
 *  not counted: its in-flight writes have no offset to end on, and
 *  km_log_sync() / km_log_close() wait for them. 0 means shutdown may
 *  close the log, then destroy the writer. */
uint32_t km_local_write_pending(const struct km_local_write *lw);

/** Counters. */
void km_local_write_get_stats(const struct km_local_write *lw,
			      struct km_local_write_stats *out);

#ifdef __cplusplus
}
#endif

#endif
