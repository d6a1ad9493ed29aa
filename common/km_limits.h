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

#endif
