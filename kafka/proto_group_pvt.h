/* Shared by kafka/proto_group_*.c only, not for direct inclusion: byte
 * fields as spans, capacity-checked arrays, the nullable topics array of
 * OffsetFetch. */
#ifndef KM_KAFKA_PROTO_GROUP_PVT_H
#define KM_KAFKA_PROTO_GROUP_PVT_H

#include "kafka/proto_group.h"

/* Version check first, before any byte: the field defaults are set by the
 * caller, then this fails the reader or writer. */
int km_proto_group_rd_check(struct km_wire_rd *r, int16_t api_key, int16_t version);
int km_proto_group_wr_check(struct km_wire_wr *w, int16_t api_key, int16_t version);

/* BYTES (int32 / compact length) left in place. */
int km_proto_group_rd_bytes(struct km_wire_rd *r, bool flex, bool nullable,
		      struct km_group_bytes *b);
int km_proto_group_wr_bytes(struct km_wire_wr *w, bool flex, bool nullable,
		      const struct km_group_bytes *b);

/* A (NULLABLE_)STRING left in place (offset metadata, up to 32767 bytes). */
int km_proto_group_rd_strspan(struct km_wire_rd *r, bool flex, bool nullable,
			struct km_group_bytes *b);
int km_proto_group_wr_strbytes(struct km_wire_wr *w, bool flex, bool nullable,
			 const struct km_group_bytes *b);

/* An array count that must fit `room` items: KM_EWIRECAPACITY if not.
 * A null array (nullable only) reads as -1. */
int km_proto_group_rd_count(struct km_wire_rd *r, bool flex, bool nullable,
		      uint32_t room, int32_t *n);

/* Write an array count of n items (n <= INT32_MAX asserted). */
int km_proto_group_wr_count(struct km_wire_wr *w, bool flex, uint32_t n);

/* Read [Name, [int32]] topics, nullable when `nullable`: *is_null set. */
int km_proto_group_rd_topics_i32(struct km_wire_rd *r, bool flex, bool nullable,
			   const struct km_proto_topics_out *out,
			   bool *is_null);
int km_proto_group_wr_topics_i32(struct km_wire_wr *w, bool flex, bool is_null,
			   const struct km_proto_topic *topics, uint32_t n,
			   const int32_t *parts, uint32_t n_parts);

/* Read an array of n_max names (STRING), capacity-checked. */
int km_proto_group_rd_names(struct km_wire_rd *r, bool flex, struct km_wire_name *a,
		      uint32_t max, uint32_t *n);
int km_proto_group_wr_names(struct km_wire_wr *w, bool flex,
		      const struct km_wire_name *a, uint32_t n);

#endif
