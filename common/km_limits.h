/* Every capacity in one place (STYLE 9), each with its memory cost. */
#ifndef KM_COMMON_LIMITS_H
#define KM_COMMON_LIMITS_H

/* Largest record batch accepted anywhere, unless configured lower. Kafka's
 * default message.max.bytes is ~1 MiB, but topics may raise it; 64 MiB bounds
 * the staging copy a batch may need when it straddles buffers. */
#define KM_BATCH_BYTES_MAX (64u * 1024 * 1024)

/* Largest size a compressed local-write batch's records may decompress to
 * when they are validated (kafka/inflate.h); past it the batch is refused as
 * a decompression bomb. One buffer of this size per worker, malloc'd at
 * start: its pages cost memory only once a batch that large was seen.
 * librdkafka's batch.size (1 MB of uncompressed messages by default) and
 * the Java producer's batch.size (16 KiB compressed) stay far below it. */
#define KM_INFLATE_BYTES_MAX (32u * 1024 * 1024)

/* Cluster ids are 22-character base64 UUIDs in Kafka; allow some slack for
 * hand-set ids. Costs this many bytes in every parsed control record. */
#define KM_CLUSTER_ID_BYTES_MAX 64u

/* Largest region km_crc32c_patch() takes in one call: the delta is staged on
 * the stack. The PID rewrite changes 8 bytes. */
#define KM_CRC_PATCH_BYTES_MAX 64u

/* ---- The group coordinator (dataplane/group/, dataplane/serve/frontend_group.c,
 * frontend_offsets.c). Its per-request tables are allocated once, by
 * km_frontend_create(), from these bounds and the front-end's own
 * (parts_max, topics_max): about 8 MiB in all. A request over one gets a
 * Kafka error or, where its response has no field for one, is refused
 * with the reason. */

/* Protocols one JoinGroup may offer (librdkafka offers 1-3 assignors).
 * ~320 B each on the handler's stack: 5 KiB. */
#define KM_GROUP_PROTOCOLS_MAX 16u

/* Members of one group (Kafka's group.max.size is unbounded by default),
 * and so the members a JoinGroup answer lists and the assignments one
 * SyncGroup may carry. ~1.1 KiB each in the front-end's tables: 1.1 MiB. */
#define KM_GROUP_MEMBERS_MAX 1024u

/* Members one LeaveGroup (v3+) may name. ~540 B each: 135 KiB. */
#define KM_GROUP_LEAVE_MAX 256u

/* Groups one ListGroups answer lists. ~800 B each: 800 KiB. */
#define KM_GROUP_LIST_MAX 1024u

/* Groups one DescribeGroups may name, and the members its answer lists in
 * all. ~1.3 KiB and ~1.2 KiB each: 80 KiB and 1.2 MiB. */
#define KM_GROUP_DESCRIBE_GROUPS_MAX 64u
#define KM_GROUP_DESCRIBE_MEMBERS_MAX 1024u

/* One write of committed offsets, as a batch: Kafka's default
 * message.max.bytes, which bounds an append to __consumer_offsets there
 * too. A larger OffsetCommit is answered INVALID_COMMIT_OFFSET_SIZE, as
 * Kafka answers it; an offset sync from the source is split into batches
 * of at most this. */
#define KM_GOFFSETS_BATCH_BYTES_MAX (1u << 20)

/* Writes of committed offsets not yet durable (56 B each: 56 KiB), and the
 * ring their batches are built in and kept in until then, to update the
 * table (4 MiB). A write that finds no room waits: an OffsetCommit stays
 * in the receive queue until earlier ones are durable. The ring holds the
 * largest write: a batch of KM_GOFFSETS_BATCH_BYTES_MAX and the room it is
 * built in (its keys and values again, and 56 B per record). */
#define KM_GOFFSETS_WRITES_MAX 1024u
#define KM_GOFFSETS_WRITE_RING_BYTES (4u << 20)

#endif
