#include "dataplane/net/tcp/arp.h"

#include <errno.h>
#include <string.h>

#include "common/endian.h"
#include "common/km_assert.h"
#include "dataplane/net/tcp/wire.h"

size_t km_arp_memsize(uint32_t entries)
{
	return (size_t)entries * sizeof(struct km_arp_entry);
}

int km_arp_init(struct km_arp *a, void *mem, uint32_t entries,
		uint32_t timeout_ms, uint32_t retry_ms)
{
	if (entries == 0 || timeout_ms == 0 || retry_ms == 0)
		return -EINVAL;
	KM_ASSERT(mem != NULL);
	a->e = mem;
	a->n = entries;
	a->timeout_ms = timeout_ms;
	a->retry_ms = retry_ms;
	memset(a->e, 0, km_arp_memsize(entries));
	return 0;
}

static struct km_arp_entry *find(const struct km_arp *a, uint32_t ip)
{
	for (uint32_t i = 0; i < a->n; i++)
		if (a->e[i].ip == ip)
			return &a->e[i];
	return NULL;
}

/* A free entry, else the one used least recently. */
static struct km_arp_entry *take(struct km_arp *a, uint32_t ip, uint64_t now)
{
	struct km_arp_entry *v = &a->e[0];

	for (uint32_t i = 0; i < a->n; i++) {
		if (a->e[i].ip == 0) {
			v = &a->e[i];
			break;
		}
		if (a->e[i].used_ms < v->used_ms)
			v = &a->e[i];
	}
	memset(v, 0, sizeof(*v));
	v->ip = ip;
	v->used_ms = now;
	return v;
}

static bool request_due(const struct km_arp *a, struct km_arp_entry *e,
			uint64_t now)
{
	if (e->requested && now < e->req_ms + a->retry_ms)
		return false;
	e->requested = 1;
	e->req_ms = now;
	return true;
}

int km_arp_resolve(struct km_arp *a, uint32_t ip, uint64_t now,
		   uint8_t mac[6], bool *request)
{
	struct km_arp_entry *e = find(a, ip);

	KM_ASSERT_HOT(ip != 0);
	*request = false;
	if (e == NULL)
		e = take(a, ip, now);
	e->used_ms = now;
	if (!e->valid) {
		*request = request_due(a, e, now);
		return -EAGAIN;
	}
	if (now >= e->expire_ms)
		*request = request_due(a, e, now);
	memcpy(mac, e->mac, 6);
	return 0;
}

bool km_arp_update(struct km_arp *a, uint32_t ip, const uint8_t mac[6],
		   uint64_t now, bool create)
{
	struct km_arp_entry *e = find(a, ip);
	bool was_valid;

	if (e == NULL) {
		if (!create)
			return false;
		e = take(a, ip, now);
	}
	was_valid = e->valid;
	memcpy(e->mac, mac, 6);
	e->valid = 1;
	e->requested = 0;
	e->expire_ms = now + a->timeout_ms;
	e->used_ms = now;
	return !was_valid;
}

bool km_arp_known(const struct km_arp *a, uint32_t ip, bool *valid)
{
	const struct km_arp_entry *e = find(a, ip);

	*valid = e != NULL && e->valid;
	return e != NULL;
}

size_t km_arp_build(uint8_t *frame, const uint8_t eth_dst[6], uint16_t op,
		    const uint8_t sha[6], uint32_t spa, const uint8_t tha[6],
		    uint32_t tpa)
{
	uint8_t *p = frame + ETH_HDR_LEN;

	memset(frame, 0, ETH_FRAME_MIN);
	memcpy(frame + ETH_OFF_DST, eth_dst, 6);
	memcpy(frame + ETH_OFF_SRC, sha, 6);
	km_store_be16(frame + ETH_OFF_TYPE, ETH_TYPE_ARP);
	km_store_be16(p + ARP_OFF_HTYPE, ARP_HTYPE_ETH);
	km_store_be16(p + ARP_OFF_PTYPE, ETH_TYPE_IPV4);
	p[ARP_OFF_HLEN] = 6;
	p[ARP_OFF_PLEN] = 4;
	km_store_be16(p + ARP_OFF_OP, op);
	memcpy(p + ARP_OFF_SHA, sha, 6);
	km_store_be32(p + ARP_OFF_SPA, spa);
	memcpy(p + ARP_OFF_THA, tha, 6);
	km_store_be32(p + ARP_OFF_TPA, tpa);
	return ETH_FRAME_MIN;
}

int km_arp_parse(const uint8_t *p, size_t len, struct km_arp_pkt *out)
{
	/* RFC 826: "?Do I have the hardware type in ar$hrd?" and the same
	 * for ar$pro; then the lengths for Ethernet and IPv4. */
	if (len < ARP_LEN)
		return -EBADMSG;
	if (km_load_be16(p + ARP_OFF_HTYPE) != ARP_HTYPE_ETH)
		return -EBADMSG;
	if (km_load_be16(p + ARP_OFF_PTYPE) != ETH_TYPE_IPV4)
		return -EBADMSG;
	if (p[ARP_OFF_HLEN] != 6 || p[ARP_OFF_PLEN] != 4)
		return -EBADMSG;
	out->op = km_load_be16(p + ARP_OFF_OP);
	if (out->op != ARP_OP_REQUEST && out->op != ARP_OP_REPLY)
		return -EBADMSG;
	memcpy(out->sha, p + ARP_OFF_SHA, 6);
	out->spa = km_load_be32(p + ARP_OFF_SPA);
	memcpy(out->tha, p + ARP_OFF_THA, 6);
	out->tpa = km_load_be32(p + ARP_OFF_TPA);
	return (int)ARP_LEN;
}
