/* The mirror state of a partition, persisted in its directory
 * (`kmirror.state`, Kafka-style properties, replaced atomically) so that a
 * restart resumes where the state machine was (R4 step 5, R7).
 *
 *   state=MIRRORING|PAUSED|STOPPING|STOPPED|PREPARING|FAILED
 *   stop.mode=truncate|abort
 *   source.cluster.id=...    (the cluster mirrored from: the barrier names it)
 *   last.mirrored.offset=N   (the barrier's offset, once STOPPED)
 *   source=HOST:PORT         (set by failback: mirror from there instead of
 *                             source.bootstrap.servers)
 *   prepare.truncate.to=N    (PREPARING: cut the log to N; -1: no cut)
 *   prepare.from.start=true  (PREPARING: empty the log instead)
 *   failed.reason=...        (FAILED: why, one line)
 *   role=mirror|local        (who wrote the log: see below)
 *
 * The role is what the log holds, whatever the config says at a restart
 * (control/daemon_roles.c decides what a change of list means): `mirror`,
 * a copy written by mirroring (every file the mirror paths write; a file
 * without the key is from before roles were recorded, and only mirror
 * paths wrote files then); `local`, a partition created writable from
 * local.topics, whose file is that one line. No file at all: a partition
 * not opened by this version yet (its role comes from the lists once).
 */
#ifndef KM_CONTROL_MSTATE_H
#define KM_CONTROL_MSTATE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_MSTATE_FILE "kmirror.state"

enum km_mstate {
	KM_MSTATE_MIRRORING = 0, /* also: no file */
	KM_MSTATE_STOPPING = 1,
	KM_MSTATE_STOPPED = 2,
	KM_MSTATE_PAUSED = 3,	 /* mirrored, fetch session removed */
	KM_MSTATE_PREPARING = 4, /* start/failback: cutting back (R5) */
	KM_MSTATE_FAILED = 5,	 /* mirroring gave up: failed.reason */
};

enum km_mstate_role {
	KM_MSTATE_ROLE_NONE = 0,   /* no file */
	KM_MSTATE_ROLE_MIRROR = 1, /* written by mirroring */
	KM_MSTATE_ROLE_LOCAL = 2,  /* created writable (local.topics) */
};

struct km_mstate_rec {
	enum km_mstate state;
	enum km_mstate_role role;
	int stop_mode;			/* enum km_stop_mode */
	char source_cluster_id[256];
	int64_t last_mirrored_offset;	/* -1 until STOPPED */
	char source[272];		/* "HOST:PORT" or "" */
	int64_t prepare_truncate_to;	/* -1: none */
	bool prepare_from_start;
	char failed_reason[320];
	bool exists;			/* loaded from a file */
};

/**
 * Read dir/kmirror.state. A missing file gives MIRRORING.
 * @return 0, -errno, or KM_EMETAPROPS for a malformed file.
 */
int km_mstate_load(const char *dir, struct km_mstate_rec *out);
/** Replace dir/kmirror.state (write, fsync, rename, fsync dir). */
int km_mstate_save(const char *dir, const struct km_mstate_rec *rec);
const char *km_mstate_name(enum km_mstate s);

#ifdef __cplusplus
}
#endif

#endif
