/* ARP (RFC 826) for one Ethernet/IPv4 port: a small cache with timeouts and
 * request pacing, plus the packet codec. The endpoint (tcp_eth.c) decides
 * what to answer; this module only remembers and encodes.
 *
 * Entries are INCOMPLETE (requested, no answer yet) or VALID. A VALID entry
 * past its timeout is stale: still used, so traffic does not stop, while a
 * new request refreshes it. Requests for one address go out at most every
 * retry_ms. A full cache evicts the entry used least recently.
 */
#ifndef KM_DATAPLANE_TCP_ARP_H
#define KM_DATAPLANE_TCP_ARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are private to arp.c; visible so that the endpoint embeds the
 * cache (STYLE 5). */
struct km_arp_entry {
	uint64_t expire_ms; /* VALID: stale from then on */
	uint64_t req_ms;    /* last request sent */
	uint64_t used_ms;   /* last lookup or update, for eviction */
	uint32_t ip;	    /* 0: free */
	uint8_t mac[6];
	uint8_t valid;
	uint8_t requested;  /* req_ms is meaningful */
};

struct km_arp {
	struct km_arp_entry *e;
	uint32_t n;
	uint32_t timeout_ms;
	uint32_t retry_ms;
};

/* One parsed ARP packet (addresses in host order). */
struct km_arp_pkt {
	uint16_t op;
	uint8_t sha[6];
	uint32_t spa;
	uint8_t tha[6];
	uint32_t tpa;
};

/** Memory km_arp_init() needs for entries entries. */
size_t km_arp_memsize(uint32_t entries);

/**
 * Set up an empty cache in caller memory of km_arp_memsize(entries) bytes.
 * @return 0, or -EINVAL (entries 0, timeout_ms or retry_ms 0).
 */
int km_arp_init(struct km_arp *a, void *mem, uint32_t entries,
		uint32_t timeout_ms, uint32_t retry_ms);

/**
 * The MAC to send to ip at now. A miss creates an INCOMPLETE entry.
 * *request is set when an ARP request for ip should go out now (a miss, or
 * a stale entry, not requested within retry_ms); the entry then counts it
 * as sent.
 * @return 0 and mac, or -EAGAIN (not resolved yet).
 */
int km_arp_resolve(struct km_arp *a, uint32_t ip, uint64_t now,
		   uint8_t mac[6], bool *request);

/**
 * Learn ip -> mac (RFC 826 "merge"): update an existing entry, or create
 * one when create is set.
 * @return true if ip was not resolved before (waiting senders may go).
 */
bool km_arp_update(struct km_arp *a, uint32_t ip, const uint8_t mac[6],
		   uint64_t now, bool create);

/** True if ip has an entry, resolved or not (for tests and stats). */
bool km_arp_known(const struct km_arp *a, uint32_t ip, bool *valid);

/**
 * Build an Ethernet frame with one ARP packet, zero-padded to the 60-byte
 * minimum.
 * @return the frame length (60); frame must hold 60 bytes.
 */
size_t km_arp_build(uint8_t *frame, const uint8_t eth_dst[6], uint16_t op,
		    const uint8_t sha[6], uint32_t spa, const uint8_t tha[6],
		    uint32_t tpa);

/**
 * Parse an ARP packet (after the Ethernet header).
 * @return bytes used (28), or -EBADMSG: shorter than 28 bytes, hardware
 *         type not Ethernet or lengths not 6/4, protocol not IPv4, or an
 *         op other than request or reply.
 */
int km_arp_parse(const uint8_t *p, size_t len, struct km_arp_pkt *out);

#ifdef __cplusplus
}
#endif

#endif
