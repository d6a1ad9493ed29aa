/* Every capacity in one place (STYLE 9), each with its memory cost. */
#ifndef KM_COMMON_LIMITS_H
#define KM_COMMON_LIMITS_H

/* Largest record batch accepted anywhere, unless configured lower. Kafka's
 * default message.max.bytes is ~1 MiB, but topics may raise it; 64 MiB bounds
 * the staging copy a batch may need when it straddles buffers. */
#define KM_BATCH_BYTES_MAX (64u * 1024 * 1024)

/* Cluster ids are 22-character base64 UUIDs in Kafka; allow some slack for
 * hand-set ids. Costs this many bytes in every parsed control record. */
#define KM_CLUSTER_ID_BYTES_MAX 64u

/* Largest region km_crc32c_patch() takes in one call: the delta is staged on
 * the stack. The PID rewrite changes 8 bytes. */
#define KM_CRC_PATCH_BYTES_MAX 64u

/* ---- The group coordinator (dataplane/group/, dataplane/serve/frontend_group.c,
 * frontend_offsets.c). Its per-request tables are allocated once, by
 * km_frontend_create(), from these bounds and the front-end's own
 * (parts_max, topics_max). A request over one gets a
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

#endif
