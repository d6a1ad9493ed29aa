/* A mirrored topic's configs as synced from the source (issue 19 item 2):
 * the source's dynamic topic configs (DescribeConfigs, source
 * DYNAMIC_TOPIC_CONFIG) that config.sync.exclude lets through. The control
 * thread replaces them each sync round; any front end reads them for
 * DescribeConfigs. Rare on both sides, so a mutex guards the copy: the
 * values that change the log's behaviour travel to the owner separately
 * (km_worker_set_limits), so no hot path ever takes this lock.
 */
#ifndef KM_DATAPLANE_TCONFIG_H
#define KM_DATAPLANE_TCONFIG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kafka has about 40 topic configs; room for every one of them. */
#define KM_TCONFIG_ENTRIES_MAX 64u
#define KM_TCONFIG_NAME_BYTES 64u
#define KM_TCONFIG_VALUE_BYTES 256u

struct km_tconfig_entry {
	char name[KM_TCONFIG_NAME_BYTES];
	char value[KM_TCONFIG_VALUE_BYTES];
};

struct km_tconfig {
	pthread_mutex_t lock;
	uint32_t n;
	struct km_tconfig_entry e[KM_TCONFIG_ENTRIES_MAX]; /* sorted by name */
};

/** A store with nothing synced. @return 0, or -ENOMEM. */
int km_tconfig_new(struct km_tconfig **out);
void km_tconfig_free(struct km_tconfig *t);

/**
 * Replace every synced entry with e[0..n) (sorted here; n is capped at
 * KM_TCONFIG_ENTRIES_MAX). @return 1 if anything changed, else 0.
 */
int km_tconfig_replace(struct km_tconfig *t, const struct km_tconfig_entry *e,
		       uint32_t n);

/** Copy out up to max entries, sorted by name. @return the count. */
uint32_t km_tconfig_copy(struct km_tconfig *t, struct km_tconfig_entry *out,
			 uint32_t max);

/** Entries held now (a bound for a response; may change after). */
uint32_t km_tconfig_count(struct km_tconfig *t);

/** The synced value of name into value. @return true if synced. */
bool km_tconfig_get(struct km_tconfig *t, const char *name, char *value,
		    size_t cap);

#ifdef __cplusplus
}
#endif

#endif
