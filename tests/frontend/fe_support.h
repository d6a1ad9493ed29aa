/* C helpers for the front-end tests: everything that needs
 * dataplane/serve/part.h, which does not compile as C++ (its _Atomic fields), so
 * the gtest files never include it. A partition table with its ops (produce
 * straight into each partition's km_local_write: the caller's thread owns
 * every log) and a producer-id counter; and local-write outcomes captured
 * into a plain struct. */
#ifndef KM_TESTS_FRONTEND_FE_SUPPORT_H
#define KM_TESTS_FRONTEND_FE_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_log;
struct km_local_write;
struct km_part_table;
struct km_part_ops;
struct fe_parts;

/* A table of n partitions; fill every entry, in (topic, partition) order. */
struct fe_parts *fe_parts_new(uint32_t n, int64_t first_pid);
void fe_parts_set(struct fe_parts *t, uint32_t i, const char *topic,
		  int32_t partition, int writable, struct km_log *log,
		  struct km_local_write *lw);
const struct km_part_table *fe_parts_table(struct fe_parts *t);
const struct km_part_ops *fe_parts_ops(struct fe_parts *t);
/* Mark partition i internal (__consumer_offsets: clients may not Produce). */
void fe_parts_set_internal(struct fe_parts *t, uint32_t i, int internal);
/* ops->produce calls that reached a partition's writer. */
uint64_t fe_parts_produce_calls(const struct fe_parts *t, uint32_t i);
/* Take partition i offline (error set) or back (0). */
void fe_parts_set_error(struct fe_parts *t, uint32_t i, int err);
/* The next n ops->write_marker calls for partition i fail (-EAGAIN, as a
 * full ring of the owner); how many calls it had. */
void fe_parts_fail_markers(struct fe_parts *t, uint32_t i, uint32_t n);
uint64_t fe_parts_marker_calls(const struct fe_parts *t, uint32_t i);
void fe_parts_free(struct fe_parts *t);

/* One km_local_write outcome, as the callback saw it. */
struct fe_outcome {
	int done;		/* callbacks run: must end at exactly 1 */
	int err;
	int64_t base_offset;
	int64_t log_start;
	int64_t durable_at_done; /* km_log_durable_offset() in the callback */
	int64_t appended_at_done;
	struct km_log *log;
};

/* km_local_write_submit() with a callback that fills *out. */
int fe_lw_submit(struct km_local_write *lw, const void *records, uint32_t len,
		 int16_t acks, struct fe_outcome *out);
/* The same, with the records cut into pieces (1..16, uneven) segments, as
 * receive buffers deliver them. */
int fe_lw_submit_split(struct km_local_write *lw, const void *records,
		       uint32_t len, uint32_t pieces, int16_t acks,
		       struct fe_outcome *out);
/* km_local_write_adopt() with that callback. */
int fe_lw_adopt(struct km_local_write *lw, void *records, uint32_t len,
		int16_t acks, struct fe_outcome *out, void (*release)(void *));

/* km_local_write_marker() (coordinator epoch 0) with that callback. */
int fe_lw_marker(struct km_local_write *lw, int64_t pid, int16_t epoch,
		 bool commit, struct fe_outcome *out);

#ifdef __cplusplus
}
#endif

#endif
