/* Frames in: Ethernet, ARP and IPv4 checks, TCP header parsing, then the
 * segment goes to tcp_input.c with its payload as pieces of the received
 * buffers. Frames out: next-hop resolution and the tx callback.
 *
 * Headers are copied (at most RX_HDR_MAX bytes) so that a header split
 * across chain segments parses like any other; payload is never copied.
 * Checks run in the order of RFC 1812 5.2.2 for IPv4, then RFC 9293 3.10.7
 * for TCP, and each failure has its own counter.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/endian.h"
#include "common/km_assert.h"
#include "dataplane/net/tcp/arp.h"
#include "dataplane/net/tcp/csum.h"
#include "dataplane/net/tcp/tcp.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

static const uint8_t mac_bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static const uint8_t mac_zero[6];

/* A received frame: the chain, its ids, a copy of its first bytes. */
struct rx_frame {
	const struct km_chain *chain;
	const uint32_t *ids;
	uint32_t rx_flags;
	size_t len;	/* whole frame */
	size_t hl;	/* bytes copied into hdr */
	uint8_t hdr[RX_HDR_MAX];
};

static void free_ids(struct km_tcp_ep *ep, const struct rx_frame *f)
{
	for (uint32_t i = 0; i < f->chain->n_iov; i++)
		km_tcp_buf_put(ep, f->ids[i]);
}

static int drop(struct km_tcp_ep *ep, const struct rx_frame *f,
		enum km_tcp_drop why)
{
	ep->st.tcp.drops[why]++;
	free_ids(ep, f);
	return -EBADMSG;
}

/* ---- out ----------------------------------------------------------------- */

void km_tcp_tx_frame(struct km_tcp_ep *ep, const struct iovec *iov,
		  uint32_t n_iov, uint32_t flags)
{
	if (ep->ops->tx(ep->ctx, iov, n_iov, flags) < 0)
		ep->st.tx_errors++;
	else
		ep->st.frames_out++;
}

static void arp_send(struct km_tcp_ep *ep, const uint8_t dst[6], uint16_t op,
		     const uint8_t tha[6], uint32_t tpa)
{
	uint8_t frame[ETH_FRAME_MIN];
	struct iovec iov = { frame, 0 };

	iov.iov_len = km_arp_build(frame, dst, op, ep->cfg.mac, ep->cfg.ip,
				   tha, tpa);
	km_tcp_tx_frame(ep, &iov, 1, 0);
	if (op == ARP_OP_REQUEST)
		ep->st.arp_requests_out++;
	else
		ep->st.arp_replies_out++;
}

bool km_tcp_resolve(struct km_tcp_ep *ep, uint32_t nexthop, uint8_t mac[6])
{
	bool request;
	int r = km_arp_resolve(&ep->arp, nexthop, ep->now, mac, &request);

	if (request)
		arp_send(ep, mac_bcast, ARP_OP_REQUEST, mac_zero, nexthop);
	if (r == 0)
		return true;
	ep->st.arp_misses++;
	return false;
}

/* ---- ARP in -------------------------------------------------------------- */

static bool mac_unicast(const uint8_t mac[6])
{
	return (mac[0] & 1) == 0 && memcmp(mac, mac_zero, 6) != 0;
}

static bool ip_unicast(uint32_t ip)
{
	return ip != 0 && ip < 0xe0000000u;
}

static int arp_input(struct km_tcp_ep *ep, struct rx_frame *f)
{
	struct km_arp_pkt a;
	bool for_us;

	if (km_arp_parse(f->hdr + ETH_HDR_LEN, f->hl - ETH_HDR_LEN, &a) < 0)
		return drop(ep, f, KM_TCP_DROP_ARP_BAD);
	if (!mac_unicast(a.sha) || memcmp(a.sha, ep->cfg.mac, 6) == 0 ||
	    a.spa == ep->cfg.ip)
		return drop(ep, f, KM_TCP_DROP_ARP_SRC);
	free_ids(ep, f);
	ep->st.arp_in++;
	for_us = a.tpa == ep->cfg.ip;
	/* RFC 5227 probes (sender 0.0.0.0) teach nothing. */
	if (!ip_unicast(a.spa)) {
		ep->st.arp_ignored++;
		return 0;
	}
	/* RFC 826: merge the sender into an existing entry; add it only if
	 * the packet is for us. */
	if (km_arp_update(&ep->arp, a.spa, a.sha, ep->now, for_us)) {
		ep->st.arp_resolved++;
		km_tcp_arp_resolved(ep, a.spa);
	}
	if (!for_us) {
		ep->st.arp_ignored++;
		return 0;
	}
	if (a.op == ARP_OP_REQUEST)
		arp_send(ep, a.sha, ARP_OP_REPLY, a.sha, a.spa);
	return 0;
}

/* ---- IPv4 + TCP in ------------------------------------------------------- */

/* RFC 9293 3.1 options; malformed lengths drop the segment. */
static int tcp_options(const uint8_t *o, uint32_t len, struct tcp_seg *s)
{
	uint32_t i = 0;

	while (i < len) {
		uint8_t kind = o[i], olen;

		if (kind == TCPOPT_EOL)
			break;
		if (kind == TCPOPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= len)
			return -EBADMSG;
		olen = o[i + 1];
		if (olen < 2 || i + olen > len)
			return -EBADMSG;
		if (kind == TCPOPT_MSS && olen != TCPOPT_MSS_LEN)
			return -EBADMSG;
		if (kind == TCPOPT_WS && olen != TCPOPT_WS_LEN)
			return -EBADMSG;
		if (kind == TCPOPT_SACK_PERM && olen != TCPOPT_SACK_PERM_LEN)
			return -EBADMSG;
		/* SACK blocks the peer sends are not used: what we send is
		 * small, go-back-N recovers it. */
		if (kind == TCPOPT_SACK_PERM)
			s->sack_ok = true;
		if (kind == TCPOPT_MSS)
			s->mss = km_load_be16(o + i + 2);
		/* RFC 7323 2.3: a shift above 14 is used as 14. */
		if (kind == TCPOPT_WS)
			s->wscale = o[i + 2] > TCP_WS_MAX ?
				    TCP_WS_MAX : o[i + 2];
		i += olen;
	}
	return 0;
}

static bool flags_ok(uint8_t fl)
{
	if ((fl & TCP_SYN) && (fl & (TCP_FIN | TCP_RST)))
		return false;
	/* RFC 9293 3.10.7.4 eighth step: "if the ACK bit is off, drop the
	 * segment"; only SYN (SYN-SENT) and RST are looked at without it. */
	return (fl & (TCP_ACK | TCP_SYN | TCP_RST)) != 0;
}

/* Payload bytes as pieces of their buffers; ids that hold none go back.
 * Ethernet padding past the IPv4 total length is not payload. */
static void make_pieces(struct km_tcp_ep *ep, const struct rx_frame *f,
			size_t off, struct tcp_seg *s, uint32_t data_seq)
{
	const struct km_chain *ch = f->chain;
	size_t seg_start = 0, pay_end = off + s->len;

	s->n = 0;
	for (uint32_t i = 0; i < ch->n_iov; i++) {
		size_t seg_end = seg_start + ch->iov[i].iov_len;
		size_t a = off > seg_start ? off : seg_start;
		size_t b = pay_end < seg_end ? pay_end : seg_end;

		if (a >= b) {
			km_tcp_buf_put(ep, f->ids[i]);
		} else {
			struct tcp_piece *p = &s->p[s->n++];

			p->base = (uint8_t *)ch->iov[i].iov_base +
				  (a - seg_start);
			p->len = (uint32_t)(b - a);
			p->seq = data_seq + (uint32_t)(a - off);
			p->buf_id = f->ids[i];
		}
		seg_start = seg_end;
	}
}

static bool l4_csum_ok(const struct rx_frame *f, uint32_t src, uint32_t dst,
		       uint16_t tcp_len)
{
	struct km_chain_cur cur = km_chain_start(f->chain);
	uint32_t sum = km_csum_pseudo(src, dst, IP_PROTO_TCP, tcp_len);

	if (f->rx_flags & KM_TCP_RX_L4_CSUM_GOOD)
		return true;
	if (km_chain_advance(f->chain, &cur, ETH_HDR_LEN + IP_HDR_LEN) < 0)
		return false;
	if (km_csum_chain(f->chain, cur, tcp_len, &sum) < 0)
		return false;
	return km_csum_final(sum) == 0;
}

static int tcp_parse(struct km_tcp_ep *ep, struct rx_frame *f, uint32_t src,
		     uint16_t tcp_len)
{
	const uint8_t *t = f->hdr + ETH_HDR_LEN + IP_HDR_LEN;
	struct tcp_seg s;
	uint32_t doff;

	if (tcp_len < TCP_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_TCP_SHORT);
	doff = (uint32_t)(t[TCP_OFF_DOFF] >> 4) * 4;
	if (doff < TCP_HDR_LEN || doff > tcp_len)
		return drop(ep, f, KM_TCP_DROP_TCP_DOFF);
	if ((f->rx_flags & KM_TCP_RX_L4_CSUM_BAD) ||
	    !l4_csum_ok(f, src, ep->cfg.ip, tcp_len))
		return drop(ep, f, KM_TCP_DROP_TCP_CSUM);
	memset(&s, 0, offsetof(struct tcp_seg, p));
	s.wscale = -1;
	if (tcp_options(t + TCP_HDR_LEN, doff - TCP_HDR_LEN, &s) < 0)
		return drop(ep, f, KM_TCP_DROP_TCP_OPTS);
	s.flags = t[TCP_OFF_FLAGS] & 0x3f;
	if (!flags_ok(s.flags))
		return drop(ep, f, KM_TCP_DROP_TCP_FLAGS);
	s.sport = km_load_be16(t + TCP_OFF_SPORT);
	s.dport = km_load_be16(t + TCP_OFF_DPORT);
	if (s.sport == 0 || s.dport == 0)
		return drop(ep, f, KM_TCP_DROP_TCP_PORT);
	s.src_ip = src;
	s.seq = km_load_be32(t + TCP_OFF_SEQ);
	s.ack = km_load_be32(t + TCP_OFF_ACK);
	s.win = km_load_be16(t + TCP_OFF_WIN);
	s.len = tcp_len - doff;
	memcpy(s.src_mac, f->hdr + ETH_OFF_SRC, 6);
	make_pieces(ep, f, ETH_HDR_LEN + IP_HDR_LEN + doff, &s,
		    s.seq + ((s.flags & TCP_SYN) ? 1 : 0));
	km_tcp_segment(ep, &s);
	return 0;
}

static bool ip_csum_ok(const struct rx_frame *f, const uint8_t *ip)
{
	if (f->rx_flags & KM_TCP_RX_IP_CSUM_GOOD)
		return true;
	return km_csum_final(km_csum_add(0, ip, IP_HDR_LEN)) == 0;
}

static int ip_input(struct km_tcp_ep *ep, struct rx_frame *f)
{
	const uint8_t *ip = f->hdr + ETH_HDR_LEN;
	uint32_t ihl, tot, src;

	if (f->hl < ETH_HDR_LEN + IP_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_IP_SHORT);
	if ((ip[IP_OFF_VHL] >> 4) != 4)
		return drop(ep, f, KM_TCP_DROP_IP_VERSION);
	ihl = (uint32_t)(ip[IP_OFF_VHL] & 0x0f) * 4;
	if (ihl < IP_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_IP_HLEN);
	if (ihl > IP_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_IP_OPTIONS);
	tot = km_load_be16(ip + IP_OFF_LEN);
	if (tot < IP_HDR_LEN || tot > f->len - ETH_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_IP_LEN);
	if ((f->rx_flags & KM_TCP_RX_IP_CSUM_BAD) || !ip_csum_ok(f, ip))
		return drop(ep, f, KM_TCP_DROP_IP_CSUM);
	if (km_load_be16(ip + IP_OFF_FRAG) & (IP_FLAG_MF | IP_FRAG_OFF_MASK))
		return drop(ep, f, KM_TCP_DROP_IP_FRAG);
	if (km_load_be32(ip + IP_OFF_DST) != ep->cfg.ip)
		return drop(ep, f, KM_TCP_DROP_IP_DST);
	src = km_load_be32(ip + IP_OFF_SRC);
	if (!ip_unicast(src) || src == ep->cfg.ip ||
	    (src | ep->cfg.netmask) == UINT32_MAX)
		return drop(ep, f, KM_TCP_DROP_IP_SRC);
	if (ip[IP_OFF_PROTO] != IP_PROTO_TCP)
		return drop(ep, f, KM_TCP_DROP_IP_PROTO);
	return tcp_parse(ep, f, src, (uint16_t)(tot - IP_HDR_LEN));
}

static size_t chain_len(const struct km_chain *c)
{
	size_t n = 0;

	for (uint32_t i = 0; i < c->n_iov; i++)
		n += c->iov[i].iov_len;
	return n;
}

static int frame_input(struct km_tcp_ep *ep, struct rx_frame *f)
{
	const uint8_t *dst = f->hdr + ETH_OFF_DST;
	uint16_t type;

	if (f->hl < ETH_HDR_LEN)
		return drop(ep, f, KM_TCP_DROP_ETH_SHORT);
	type = km_load_be16(f->hdr + ETH_OFF_TYPE);
	/* IEEE 802.3: a source address is never a group address; we would
	 * answer to it. */
	if (!mac_unicast(f->hdr + ETH_OFF_SRC))
		return drop(ep, f, KM_TCP_DROP_ETH_SRC);
	if (type == ETH_TYPE_ARP) {
		if (memcmp(dst, ep->cfg.mac, 6) != 0 &&
		    memcmp(dst, mac_bcast, 6) != 0)
			return drop(ep, f, KM_TCP_DROP_ETH_DST);
		return arp_input(ep, f);
	}
	if (type != ETH_TYPE_IPV4)
		return drop(ep, f, KM_TCP_DROP_ETH_TYPE);
	if (memcmp(dst, ep->cfg.mac, 6) != 0)
		return drop(ep, f, KM_TCP_DROP_ETH_DST);
	return ip_input(ep, f);
}

int km_tcp_input(struct km_tcp_ep *ep, const struct km_chain *frame,
		 const uint32_t *buf_ids, uint32_t rx_flags)
{
	struct rx_frame f;
	int r;

	KM_ASSERT(frame->n_iov > 0);
	for (uint32_t i = 0; i < frame->n_iov; i++) {
		KM_ASSERT(buf_ids[i] < ep->cfg.bufs_max);
		KM_ASSERT_HOT(ep->bufs[buf_ids[i]].state == BUF_FREE);
	}
	ep->now = ep->ops->now_ms(ep->ctx);
	ep->st.frames_in++;
	f.chain = frame;
	f.ids = buf_ids;
	f.rx_flags = rx_flags;
	if (frame->n_iov > KM_TCP_FRAME_SEGS_MAX) {
		r = drop(ep, &f, KM_TCP_DROP_FRAME_SEGS);
		km_tcp_bufs_flush(ep);
		return r;
	}
	f.len = chain_len(frame);
	f.hl = km_chain_copy(frame, km_chain_start(frame), f.hdr, RX_HDR_MAX);
	r = frame_input(ep, &f);
	km_tcp_bufs_flush(ep);
	return r;
}
