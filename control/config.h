/* kmirrord's configuration: `kmirrord --config FILE [--set key=value]...`.
 *
 * FILE is Kafka-style properties (control/props.h has the syntax). Every key
 * is one of those in the table below (README.md has it with meanings); an
 * unknown key is an error naming the key, the file and the line. A key may
 * appear more than once: the last value wins, as in Java (a duplicate in
 * the file is logged at WARN); --set values override the file, in order.
 * Every value is validated when loaded, and the error names the key and the
 * value. An empty value (`topics=`) resets a key to its default.
 *
 * Integers are Kafka's plain numbers; byte sizes may also carry a binary
 * suffix (K/KiB, M/MiB, G/GiB: powers of 1024; "KB" and friends are refused
 * as ambiguous) and durations in ms may carry ms, s, min or h.
 *
 * Required: data.dir. source.bootstrap.servers and topics go together:
 * both set for a host that mirrors, both unset for a host that only serves
 * the partitions already in data.dir (after a failover, say); one without
 * the other is an error.
 *
 * Memory: struct km_config is plain data with fixed-size arrays (the _MAX
 * constants below); it holds no pointers, so it may be copied. Loading
 * allocates temporaries and frees them before returning.
 */
#ifndef KM_CONTROL_CONFIG_H
#define KM_CONTROL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/km_limits.h"
#include "common/log.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_log_config; /* iouring_log/log.h: not included, so that this header
		       * does not pull in liburing */

/* Capacities (STYLE 9); struct km_config is about 75 KiB with these. */
#define KM_CONFIG_TOPICS_MAX 128u	/* `topics` entries: 250 B each */
#define KM_CONFIG_TOPIC_BYTES_MAX 250u	/* Kafka's 249 chars + NUL */
/* The internal partition of committed offsets (dataplane/group/goffsets.h). */
#define KM_CONFIG_OFFSETS_TOPIC "__consumer_offsets"
/* The transaction coordinator's log (dataplane/group/txnlog.h). */
#define KM_CONFIG_TXN_TOPIC "__transaction_state"
#define KM_CONFIG_OFFSETS_SEGMENT_BYTES (8u << 20)
#define KM_CONFIG_GROUPS_MAX 64u	/* `groups` entries */
#define KM_CONFIG_GROUP_BYTES_MAX 256u	/* a group id or pattern + NUL */
#define KM_CONFIG_GROUP_RE_BYTES_MAX 1024u /* groups.include/exclude + NUL */
#define KM_CONFIG_BOOTSTRAP_MAX 16u	/* source.bootstrap.servers: 260 B each */
#define KM_CONFIG_HOST_BYTES_MAX 254u	/* a 253-char DNS name + NUL */
#define KM_CONFIG_WORKERS_MAX 64u	/* worker threads */
#define KM_CONFIG_PATH_BYTES_MAX 1024u	/* data.dir, incl. NUL */
#define KM_CONFIG_SOCKET_BYTES_MAX 108u /* sun_path: 107 chars + NUL */
#define KM_CONFIG_EAL_ARGS_BYTES_MAX 1024u /* dpdk.eal.args, incl. NUL */
#define KM_CONFIG_EAL_ARGC_MAX 64u	/* words in dpdk.eal.args */
#define KM_CONFIG_DPDK_PORT_BYTES_MAX 256u /* dpdk.port, incl. NUL */
#define KM_CONFIG_DPDK_MTU_MIN 576u	/* dpdk.mtu, unless 0 (IPv4's minimum) */
/* Listeners on the DPDK port take ports below this: the endpoint's own
 * outgoing connections use the rest (dataplane/net/dpdk/dnet_pvt.h,
 * DNET_PORT_BASE). */
#define KM_CONFIG_DPDK_LISTEN_PORT_END 32768u
#define KM_CONFIG_FILE_BYTES_MAX (1u << 20) /* largest config file read */
#define KM_CONFIG_SETS_MAX 256u		/* --set flags */
/* Partitions one host serves in all (partitions.max), and so at most of
 * one local topic: Kafka caps neither; this bounds the table allocated
 * once at start (daemon_parts.c). */
#define KM_CONFIG_PARTITIONS_MAX (1u << 20)
#define KM_CONFIG_LOCAL_PARTS_MAX KM_CONFIG_PARTITIONS_MAX
#define KM_CONFIG_LISTENERS_MAX 4u	/* `listeners` entries */
#define KM_CONFIG_LISTENER_NAME_BYTES 32u /* a listener's name + NUL */
#define KM_CONFIG_PROTOCOL_MAP_MAX 8u	/* listener.security.protocol.map */
/* Enough for any message km_config_* and km_cluster_id_* write. */
#define KM_CONFIG_ERR_BYTES_MAX 2048u

/* Unix socket created in data.dir when control.socket is not set. */
#define KM_CONFIG_SOCKET_DEFAULT_NAME "kmirrord.sock"

enum km_config_net_mode {
	KM_CONFIG_NET_KERNEL = 0, /* io_uring sockets */
	KM_CONFIG_NET_DPDK = 1,	  /* DPDK port + kmirror's own TCP endpoint */
};

enum km_config_stop_mode {
	KM_CONFIG_STOP_TRUNCATE = 0, /* R4: cut to a clean LSO */
	KM_CONFIG_STOP_ABORT = 1,    /* R4: keep all, ABORT open txns */
};

enum km_config_offset_reset {
	KM_CONFIG_RESET_NONE = 0,     /* OFFSET_OUT_OF_RANGE: partition FAILED */
	KM_CONFIG_RESET_EARLIEST = 1, /* ... skip ahead to the source's start */
};

/* host:port. host is without brackets (an IPv6 literal contains ':');
 * "" means every local address (listeners only). */
struct km_config_addr {
	char host[KM_CONFIG_HOST_BYTES_MAX];
	uint16_t port;
};

/* One Kafka listener: NAME://host:port. Its security protocol (enum
 * km_secproto, dataplane/net/secconn.h) comes from
 * listener.security.protocol.map by name; its advertised address from the
 * advertised.listeners entry of the same name, else its own (the
 * machine's host name for a wildcard host; port 0 is filled in after
 * bind). */
struct km_config_listener {
	char name[KM_CONFIG_LISTENER_NAME_BYTES];
	int protocol;
	struct km_config_addr addr;
	struct km_config_addr advertised;
	bool advertised_set;
};

/* listener.security.protocol.map: NAME:PROTOCOL. */
struct km_config_protocol_map {
	char name[KM_CONFIG_LISTENER_NAME_BYTES];
	int protocol;
};

struct km_config_dpdk {
	char eal_args[KM_CONFIG_EAL_ARGS_BYTES_MAX]; /* split on blanks */
	char port[KM_CONFIG_DPDK_PORT_BYTES_MAX];    /* PCI address or vdev */
	/* IPv4 addresses in network byte order (as struct in_addr.s_addr);
	 * 0 = not set. */
	uint32_t ip_be;
	uint32_t netmask_be;
	uint32_t gateway_be;
	uint8_t mac[6];
	bool mac_set;	/* else the port's own MAC */
	uint32_t mtu;	/* dpdk.mtu: 0 = the port's own, else 576..9000 */
};

struct km_config {
	char data_dir[KM_CONFIG_PATH_BYTES_MAX];
	struct km_config_addr bootstrap[KM_CONFIG_BOOTSTRAP_MAX];
	uint32_t bootstrap_count;
	char topics[KM_CONFIG_TOPICS_MAX][KM_CONFIG_TOPIC_BYTES_MAX];
	uint32_t topics_count;
	/* Topic discovery (control/daemon_discover.c): the source's topics
	 * whose names topics.include matches and topics.exclude does not
	 * (control/namefilter.h lists) are mirrored too, the source's
	 * Metadata re-read every metadata.refresh.interval.ms. The table has
	 * room for partitions.max partitions (0: the ones found at start plus
	 * 1024, or twice them if more). */
	char topics_include[1024];	/* KM_NAMEFILTER_BYTES */
	char topics_exclude[1024];
	uint32_t metadata_refresh_interval_ms;
	uint32_t partitions_max;
	/* local.topics: writable topics served (and created) here, not
	 * mirrored: name and partition count. */
	char local_topics[KM_CONFIG_TOPICS_MAX][KM_CONFIG_TOPIC_BYTES_MAX];
	uint32_t local_partitions[KM_CONFIG_TOPICS_MAX];
	uint32_t local_topics_count;
	/* Kafka's auto.create.topics.enable (0 false, the default as in
	 * Kafka 4, 1 true: an enum of booleans[]) and num.partitions, for
	 * CreateTopics with -1 partitions and topics a Metadata creates. */
	int auto_create_topics;
	uint32_t num_partitions;
	/* Kafka's max.incremental.fetch.session.cache.slots: KIP-227 fetch
	 * sessions the listener keeps for its clients (0: none). */
	uint32_t fetch_session_slots;
	/* log.direct.io (0 false, 1 true: an enum of booleans[]): write the
	 * .log files with O_DIRECT where the filesystem supports it. */
	int log_direct_io;
	/* log.tail.cache.bytes: per worker, the newest writes' buffers kept
	 * for Fetch with direct I/O (km_log_config's tail_cache_bytes). */
	uint64_t log_tail_cache_bytes;
	struct km_config_addr listener;	  /* where the Kafka API listens */
	/* What Metadata tells clients. Without advertised.listeners: the
	 * listener, with the machine's host name for a wildcard host; port 0
	 * (an ephemeral listener) is the daemon's to fill in after bind. */
	struct km_config_addr advertised;
	bool advertised_set;
	char control_socket[KM_CONFIG_SOCKET_BYTES_MAX];
	/* The effective cluster id once km_cluster_id_resolve() has run;
	 * before, the configured one ("" if none). */
	char cluster_id[KM_CLUSTER_ID_BYTES_MAX + 1];
	bool cluster_id_configured;
	int32_t node_id;
	uint32_t workers;
	enum km_config_net_mode net_mode;
	struct km_config_dpdk dpdk;
	uint64_t segment_bytes;
	uint32_t flush_interval_ms;
	uint64_t flush_bytes;
	bool flush_always;
	enum km_config_stop_mode stop_mode;
	enum km_log_level log_level;
	enum km_config_offset_reset offset_reset;
	uint32_t fetch_bytes_max;
	uint32_t fetch_wait_ms_max;
	uint32_t batch_bytes_max;
	/* Local retention caps (-1: none), and per-topic overrides
	 * (topic.retention.ms / topic.retention.bytes, NAME:VALUE lists). */
	int64_t retention_ms;
	int64_t retention_bytes;
	struct km_config_topic_value {
		char topic[KM_CONFIG_TOPIC_BYTES_MAX];
		int64_t value;
	} topic_retention_ms[KM_CONFIG_TOPICS_MAX],
	  topic_retention_bytes[KM_CONFIG_TOPICS_MAX];
	uint32_t topic_retention_ms_count, topic_retention_bytes_count;
	/* Compaction (issue 19): topic.cleanup.policy NAME:compact|delete
	 * (value 1: compact), delete.retention.ms for every compacted topic,
	 * and the cleaner's key map bound per cleaning pass. */
	struct km_config_topic_value topic_cleanup_policy[KM_CONFIG_TOPICS_MAX];
	uint32_t topic_cleanup_policy_count;
	uint64_t delete_retention_ms;
	uint64_t cleaner_map_bytes;
	double min_cleanable_ratio;
	/* Mirroring pauses while data.dir has less free space than this. */
	uint64_t disk_free_min_bytes;
	/* Consumer groups: `groups` names the source's groups whose committed
	 * offsets are synced (ids, or fnmatch(3) patterns matched against the
	 * source's ListGroups), every group.sync.interval.ms. The coordinator
	 * of the groups served here follows Kafka's group.* settings. */
	char groups[KM_CONFIG_GROUPS_MAX][KM_CONFIG_GROUP_BYTES_MAX];
	uint32_t groups_count;
	uint32_t group_sync_interval_ms;
	/* A stop's last sync of the stopped partitions' offsets gives the
	 * source this long in all (0: none). */
	uint32_t group_sync_stop_timeout_ms;
	uint32_t group_initial_rebalance_delay_ms;
	uint32_t group_min_session_timeout_ms;
	uint32_t group_max_session_timeout_ms;
	/* groups.include / groups.exclude: POSIX extended regexes (not
	 * Java's), each matched against a whole group id of the source's
	 * ListGroups (anchored here); a group either excludes is never
	 * synced, not even one `groups` names. "": none. */
	char groups_include[KM_CONFIG_GROUP_RE_BYTES_MAX];
	char groups_exclude[KM_CONFIG_GROUP_RE_BYTES_MAX];
	/* The Kafka listener: the largest request (Kafka's
	 * socket.request.max.bytes; kmirrord lowers it to what a connection
	 * may hold of its receive buffers), and how long a client has to
	 * send the whole of a request it has begun. */
	uint32_t request_bytes_max;
	uint32_t request_timeout_ms;
	/* metrics.listener: where Prometheus scrapes GET /metrics; unset,
	 * the metrics are on the control socket only. */
	struct km_config_addr metrics_listener;
	bool metrics_listener_set;
	/* mirror.throttle.bytes.per.sec: the fetch rate of the whole host, 0
	 * for none; topic.mirror.throttle.bytes.per.sec: NAME:RATE caps of
	 * single topics (-1: none), within the host's
	 * (dataplane/fetch/throttle.h). */
	uint64_t throttle_bytes_per_sec;
	struct km_config_topic_value topic_throttle[KM_CONFIG_TOPICS_MAX];
	uint32_t topic_throttle_count;
	/* Failure handling (issue 19 item 6): a partition CONNECTING this
	 * long after a transient error FAILS (0: never), and a transient
	 * FAILED retries by itself with exponential backoff and jitter, at
	 * most max_attempts times in a row (0: unbounded). */
	uint32_t source_unavailable_ms;
	uint32_t failed_retry_initial_backoff_ms;
	uint32_t failed_retry_max_backoff_ms;
	uint32_t failed_retry_max_attempts;
	/* Topic config sync (issue 19 item 2): every config.sync.interval.ms
	 * (0: never) each mirrored topic's dynamic configs are read from the
	 * source, but for the names config.sync.exclude lists (KIP-1279's
	 * prototype's default). */
	uint32_t config_sync_interval_ms;
	char config_sync_exclude[KM_CONFIG_GROUPS_MAX][KM_CONFIG_GROUP_BYTES_MAX];
	uint32_t config_sync_exclude_count;
	/* Security to the source (issue 16), Kafka's client settings with
	 * source. in front: security.protocol (enum km_secproto,
	 * dataplane/net/secconn.h), the PEM files, whether the broker's
	 * certificate must name its host (ssl.endpoint.identification.
	 * algorithm=https, the default), the SASL mechanism (enum
	 * km_sasl_mech, kafka/sasl.h; 0: none), the user, and files holding
	 * the key's and the user's passwords, never the passwords
	 * themselves (they would show in `kmirrorctl config` and ps). */
	int source_security_protocol;
	char source_ssl_ca[KM_CONFIG_PATH_BYTES_MAX];
	char source_ssl_cert[KM_CONFIG_PATH_BYTES_MAX];
	char source_ssl_key[KM_CONFIG_PATH_BYTES_MAX];
	char source_ssl_key_password_file[KM_CONFIG_PATH_BYTES_MAX];
	bool source_ssl_verify_host;
	int source_sasl_mechanism;
	char source_sasl_username[256];
	char source_sasl_password_file[KM_CONFIG_PATH_BYTES_MAX];
	/* The transaction coordinator (issue 20): transactional ids kept
	 * (transaction.ids.max; a new one past it is refused with
	 * POLICY_VIOLATION), and how long an idle one is remembered
	 * (Kafka's transactional.id.expiration.ms, 7 days). */
	uint32_t txn_ids_max;
	uint64_t txn_id_expiration_ms;
	/* Several listeners (issue 16): listener/advertised above are the
	 * primary one's (the first PLAINTEXT listener, else the first), the
	 * address kmirrord reaches itself on and writes to its port file. */
	struct km_config_listener listeners[KM_CONFIG_LISTENERS_MAX];
	uint32_t listeners_count;
	/* advertised.listeners as given, matched by name once listeners are
	 * known (km_config_derive). */
	struct km_config_listener adv_given[KM_CONFIG_LISTENERS_MAX];
	uint32_t adv_given_count;
	struct km_config_protocol_map protocol_map[KM_CONFIG_PROTOCOL_MAP_MAX];
	uint32_t protocol_map_count;	/* 0: Kafka's default map */
	/* TLS on SSL and SASL_SSL listeners: PEM certificate chain and key,
	 * a file holding the key's password, the CA that client
	 * certificates must chain to, and Kafka's ssl.client.auth (0 none,
	 * 1 requested, 2 required). */
	char ssl_cert[KM_CONFIG_PATH_BYTES_MAX];
	char ssl_key[KM_CONFIG_PATH_BYTES_MAX];
	char ssl_key_password_file[KM_CONFIG_PATH_BYTES_MAX];
	char ssl_ca[KM_CONFIG_PATH_BYTES_MAX];
	int ssl_client_auth;
	/* SASL on the listener (issue 16): sasl.enabled.mechanisms (bits
	 * 1u << enum km_sasl_mech, kafka/sasl.h), sasl.users.file (the
	 * salted credentials kmirror-users writes) and KIP-368's
	 * connections.max.reauth.ms (0: sessions never end). */
	uint32_t sasl_enabled_mechanisms;
	char sasl_users_file[KM_CONFIG_PATH_BYTES_MAX];
	uint64_t connections_max_reauth_ms;
	/* Authorization with Kafka's ACL semantics (issue 16;
	 * dataplane/serve/acl.h): on when authorizer.class.name names
	 * Kafka's StandardAuthorizer, or acls.file is set, or acls.sync is
	 * true. ACLs from acls.file (re-read on change) and, with
	 * acls.sync, the source's for the mirrored topics and synced groups
	 * every acls.sync.interval.ms; super.users as Kafka's
	 * (semicolon-separated principals); allow.everyone.if.no.acl.found
	 * (Kafka's default false). */
	char authorizer_class_name[256];
	char acls_file[KM_CONFIG_PATH_BYTES_MAX];
	int acls_sync;
	uint32_t acls_sync_interval_ms;
	char super_users[1024];
	int allow_everyone_if_no_acl_found;
};

/** Is authorization on (any of the keys above asks for it)? */
bool km_config_authorizes(const struct km_config *cfg);

/* Under net.mode=dpdk, a listener whose host is dpdk.ip (as a dotted
 * quad) is served on the DPDK port, by worker 0's TCP endpoint: the
 * kernel has no such address to bind. */
bool km_config_listener_on_dpdk(const struct km_config *cfg,
				const struct km_config_listener *l);

/* The highest throttle rate (a TiB/s): the bucket's arithmetic stays in
 * 64 bits. */
#define KM_CONFIG_THROTTLE_MAX (1ull << 40)

/* One-line usage for kmirrord's --help and argument errors. */
#define KM_CONFIG_USAGE "usage: kmirrord --config FILE [--set key=value]..."

/** config.sync.exclude's default list. */
void km_config_sync_exclude_defaults(struct km_config *cfg);

/** `workers` when not configured: the online cores, at most WORKERS_MAX. */
uint32_t km_config_default_workers(void);

/** Every optional key at its default; data.dir and the lists empty. */
void km_config_defaults(struct km_config *cfg);

/**
 * Load the configuration: defaults, then FILE (if path is not NULL), then
 * each "key=value" of sets in order, then the checks between keys and the
 * derived values (control.socket default, advertised address).
 * The cluster id is not resolved here: see km_cluster_id_resolve().
 *
 * @param err  receives a one-line message naming the file and line (or
 *             "--set"), the key and the value (may be NULL; size it
 *             KM_CONFIG_ERR_BYTES_MAX). A contradiction between keys is
 *             prefixed with "FILE: ", or with nothing when path is NULL.
 * @return 0; or
 *   -errno          FILE cannot be read (-EFBIG: over 1 MiB);
 *   KM_ECFGSYNTAX   malformed properties text, or a --set without '=';
 *   KM_ECFGKEY      unknown key;
 *   KM_ECFGVALUE    a value that does not parse or is out of range;
 *   KM_ECFGMISSING  a required key is missing, or keys contradict;
 *   -ENOMEM.
 * On error *cfg is unspecified.
 */
int km_config_load(struct km_config *cfg, const char *path,
		   const char *const *sets, uint32_t sets_count, char *err,
		   size_t err_len);

/* kmirrord's command line, sorted; the pointers are into argv and live as
 * long as it does. */
struct km_config_args {
	const char *path; /* the last --config FILE, or NULL */
	const char *sets[KM_CONFIG_SETS_MAX]; /* "key=value", in order */
	uint32_t sets_count;
};

/**
 * Sort kmirrord's arguments (argv[0] is skipped): `--config FILE`,
 * `--config=FILE`, `--set key=value`, `--set=key=value`. Anything else is
 * refused (the caller handles --help before). Nothing is loaded yet: these
 * are the errors of the command line itself, before any of the
 * configuration's, so the caller can show the usage with them.
 * @param err  receives a one-line message naming the argument (may be NULL).
 * @return 0; or
 *   KM_ECFGSYNTAX   not an option, a flag without its value, or more than
 *                   KM_CONFIG_SETS_MAX --set;
 *   KM_ECFGMISSING  neither --config nor --set: no configuration at all.
 */
int km_config_parse_args(struct km_config_args *args, int argc,
			 const char *const *argv, char *err, size_t err_len);

/**
 * km_config_parse_args(), then km_config_load() with what it found.
 * @return as those two.
 */
int km_config_load_args(struct km_config *cfg, int argc,
			const char *const *argv, char *err, size_t err_len);

/**
 * The km_log_config for one partition: km_log_config_defaults() with
 * segment.bytes, flush.*, batch.max.bytes applied. out keeps pointers to
 * cfg->data_dir and to topic: both must outlive it.
 */
void km_config_log_config(const struct km_config *cfg, const char *topic,
			  int32_t partition, struct km_log_config *out);

/**
 * Split dpdk.eal.args into argv words: prog becomes argv[0], the words are
 * copied into buf (blanks replaced by NULs). No quoting: a word is a run of
 * non-blank characters.
 * @return argc (>= 1), or -ENOSPC if buf or argv (max entries) is short.
 */
int km_config_eal_argv(const struct km_config *cfg, const char *prog,
		       char *buf, size_t buf_len, char **argv, uint32_t max);

/**
 * Write the effective configuration as properties text, one key=value per
 * line in the order of the key table; keys that are unset and have no
 * default (cluster.id, dpdk.mac, ...) are left out. Reading the text back
 * gives the same struct, so it doubles as the start-up log of the settings.
 * @return the length written (without the NUL), or -ENOSPC if cap is short.
 */
int km_config_format(const struct km_config *cfg, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
