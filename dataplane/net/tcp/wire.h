/* Ethernet II, ARP, IPv4 and TCP header layouts: byte offsets and
 * constants, checked at compile time (STYLE 12). Fields are big-endian on
 * the wire; read them with common/endian.h. Private to dataplane/net/tcp/.
 */
#ifndef KM_DATAPLANE_TCP_WIRE_H
#define KM_DATAPLANE_TCP_WIRE_H

#include <assert.h>

/* Ethernet II (IEEE 802.3 clause 3.1.1 framing without FCS). */
#define ETH_HDR_LEN 14u
#define ETH_OFF_DST 0u
#define ETH_OFF_SRC 6u
#define ETH_OFF_TYPE 12u
#define ETH_TYPE_IPV4 0x0800u
#define ETH_TYPE_ARP 0x0806u
/* Shortest frame on the wire without FCS: NICs pad to it, we pad ARP. */
#define ETH_FRAME_MIN 60u

/* ARP for Ethernet/IPv4 (RFC 826). */
#define ARP_LEN 28u
#define ARP_OFF_HTYPE 0u
#define ARP_OFF_PTYPE 2u
#define ARP_OFF_HLEN 4u
#define ARP_OFF_PLEN 5u
#define ARP_OFF_OP 6u
#define ARP_OFF_SHA 8u
#define ARP_OFF_SPA 14u
#define ARP_OFF_THA 18u
#define ARP_OFF_TPA 24u
#define ARP_HTYPE_ETH 1u
#define ARP_OP_REQUEST 1u
#define ARP_OP_REPLY 2u

/* IPv4 (RFC 791 3.1), without options: we send none and drop any. */
#define IP_HDR_LEN 20u
#define IP_OFF_VHL 0u
#define IP_OFF_TOS 1u
#define IP_OFF_LEN 2u
#define IP_OFF_ID 4u
#define IP_OFF_FRAG 6u
#define IP_OFF_TTL 8u
#define IP_OFF_PROTO 9u
#define IP_OFF_CSUM 10u
#define IP_OFF_SRC 12u
#define IP_OFF_DST 16u
#define IP_FLAG_DF 0x4000u
#define IP_FLAG_MF 0x2000u
#define IP_FRAG_OFF_MASK 0x1fffu
#define IP_PROTO_TCP 6u
#define IP_TTL 64u

/* TCP (RFC 9293 3.1). */
#define TCP_HDR_LEN 20u
#define TCP_HDR_MAX 60u
#define TCP_OFF_SPORT 0u
#define TCP_OFF_DPORT 2u
#define TCP_OFF_SEQ 4u
#define TCP_OFF_ACK 8u
#define TCP_OFF_DOFF 12u
#define TCP_OFF_FLAGS 13u
#define TCP_OFF_WIN 14u
#define TCP_OFF_CSUM 16u
#define TCP_OFF_URP 18u
#define TCP_FIN 0x01u
#define TCP_SYN 0x02u
#define TCP_RST 0x04u
#define TCP_PSH 0x08u
#define TCP_ACK 0x10u
#define TCP_URG 0x20u
/* Options (RFC 9293 3.2, RFC 7323). */
#define TCPOPT_EOL 0u
#define TCPOPT_NOP 1u
#define TCPOPT_MSS 2u
#define TCPOPT_WS 3u
#define TCPOPT_SACK_PERM 4u
#define TCPOPT_SACK 5u
#define TCPOPT_MSS_LEN 4u
#define TCPOPT_WS_LEN 3u
#define TCPOPT_SACK_PERM_LEN 2u
/* RFC 7323 2.3: "the shift count must be limited to 14". */
#define TCP_WS_MAX 14u
/* What our SYN carries: MSS, NOP, NOP, SACK-permitted, NOP, WS. */
#define TCP_SYN_OPTS_LEN 12u
/* RFC 2018 3: without timestamps an ACK has room for 4 SACK blocks
 * (2 NOPs + kind + length + 4 * 8 bytes = 36 of the 40 option bytes). */
#define TCP_SACK_BLOCKS_MAX 4u
#define TCP_SACK_OPTS_MAX (4u + 8u * TCP_SACK_BLOCKS_MAX)
/* RFC 9293 3.7.1: without an MSS option assume 536. */
#define TCP_MSS_DEFAULT 536u

/* Our largest header: Ethernet + IPv4 + TCP with 4 SACK blocks. */
#define FRAME_HDR_MAX                                                          \
	(ETH_HDR_LEN + IP_HDR_LEN + TCP_HDR_LEN + TCP_SACK_OPTS_MAX)
/* The largest header a received frame can have (copied to parse it). */
#define RX_HDR_MAX (ETH_HDR_LEN + IP_HDR_LEN + TCP_HDR_MAX)

static_assert(ARP_OFF_TPA + 4 == ARP_LEN, "ARP layout");
static_assert(IP_OFF_DST + 4 == IP_HDR_LEN, "IPv4 layout");
static_assert(TCP_OFF_URP + 2 == TCP_HDR_LEN, "TCP layout");
static_assert(TCP_SYN_OPTS_LEN % 4 == 0, "TCP options pad to 32 bits");
static_assert(ETH_HDR_LEN + ARP_LEN <= ETH_FRAME_MIN, "ARP pads");
static_assert(TCP_SACK_OPTS_MAX <= TCP_HDR_MAX - TCP_HDR_LEN, "SACK fits");
static_assert(TCP_SYN_OPTS_LEN <= TCP_SACK_OPTS_MAX, "SYN fits");
static_assert(TCP_SACK_OPTS_MAX % 4 == 0, "SACK pads to 32 bits");
static_assert(FRAME_HDR_MAX == 90u, "largest header");

#endif
