/* Internals of the cleaner (log_clean*.c); not for inclusion elsewhere. */
#ifndef KM_IOURING_LOG_LOG_CLEAN_PVT_H
#define KM_IOURING_LOG_LOG_CLEAN_PVT_H

#include "iouring_log/log_pvt.h"
#include "kafka/inflate.h"

/* One key map slot: a 128-bit hash of the key and the offset + 1 (0: empty).
 * Like Kafka's SkimpyOffsetMap, keys are known by their hash alone. */
#define KM_CLEAN_SLOT_BYTES 24u

struct km_clean_map {
	uint8_t *slots;
	uint32_t cap;	  /* slots, a power of two */
	uint32_t cap_max; /* what cleaner_map_bytes allows */
	uint32_t n;
	int64_t latest;	  /* the last offset the map covers */
};

int km_log_clean_map_init(struct km_clean_map *m, uint64_t bytes);
void km_log_clean_map_free(struct km_clean_map *m);
/* @return 0, 1 when the map is full (nothing put), or -ENOMEM. */
int km_log_clean_map_put(struct km_clean_map *m, const uint8_t *key,
			 uint32_t len, int64_t offset);
/* The latest offset of key, or -1. */
int64_t km_log_clean_map_get(const struct km_clean_map *m, const uint8_t *key,
			     uint32_t len);

/* Kafka's CleanedTransactionMetadata: what a pass over batches in offset
 * order knows of transactions, from the .txnindex entries of its range. */
struct km_clean_aborted {
	struct km_aborted_txn t;
	int64_t observed; /* last offset of its data seen this pass, or -1 */
};

struct km_clean_txn {
	struct km_aborted_txn *aborted; /* by first offset */
	uint32_t n_aborted, next;
	struct km_clean_aborted *ongoing; /* aborted, data started */
	uint32_t n_ongoing, cap_ongoing;
	int64_t *committed;		  /* producers with kept txn data */
	uint32_t n_committed, cap_committed;
};

int km_log_clean_txn_init(struct km_clean_txn *t, struct km_log *log,
			  int64_t from, int64_t upto);
void km_log_clean_txn_free(struct km_clean_txn *t);
/* A data batch: 1 if it is aborted data (to discard), 0, or -ENOMEM. */
int km_log_clean_txn_on_batch(struct km_clean_txn *t, const struct km_batch *b);
/* A control batch: 1 if it may be discarded, 0 if not (with *keep set and
 * *index filled when it is an ABORT whose entry the new .txnindex keeps). */
int km_log_clean_txn_on_control(struct km_clean_txn *t,
				const struct km_batch *b, bool *keep,
				struct km_aborted_txn *index);

/* One record in contiguous bytes (DefaultRecord). */
struct km_clean_rec {
	uint32_t size;		 /* all of it, the length varint included */
	int8_t attributes;
	int64_t ts_delta;
	const uint8_t *rest;	 /* offsetDelta to the end of the record */
	uint32_t rest_len;
	int32_t offset_delta;
	int32_t key_len;	 /* -1: null */
	const uint8_t *key;
	int32_t value_len;	 /* -1: null */
};

/* @return the record's size, or KM_ERECORD / KM_EVARINT. */
int km_log_clean_rec_parse(const uint8_t *p, size_t len,
			   struct km_clean_rec *r);

/* A cleaning pass. */
struct km_cleaner {
	struct km_log *log;
	struct km_clean_map map;
	struct km_clean_txn txn;
	int64_t now_ms;
	struct km_inflate *inflate;
	uint8_t *out;		/* one rewritten batch */
	size_t out_cap;
	int64_t horizon_min;	/* earliest delete horizon kept */
	bool changed;		/* the segment's copy differs from it */
	struct km_log_clean_stats *st;
};

/* Fill the map from the batches of seg at or after from. @return 0, 1 when
 * the map filled up (c->map.latest says how far it got), or a code. */
int km_log_clean_map_segment(struct km_cleaner *c, struct km_segment *seg,
			     int64_t from);

/* The pure step: the batches of in, filtered by c, written to out (a new
 * active segment with in's base offset), its indexes and .txnindex
 * entries as Kafka's cleaner writes them. @return 0 or a code. */
int km_log_clean_segment(struct km_cleaner *c, struct km_segment *in,
			 struct km_segment *out);

/* log_clean_swap.c: the cleaned segment's files, made in the cleaner's
 * directory, replace segment i's in the log (crash-safe, reader-safe). */
#define KM_CLEAN_DIR "cleaner.tmp"
int km_log_clean_tmpdir(struct km_log *log, int *fd);
int km_log_clean_swap(struct km_log *log, uint32_t i, int tmp_fd);

#endif
