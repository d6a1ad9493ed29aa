/* Host name to IPv4 literal, for the sockets that take one (fetch
 * sessions, the Kafka listener, the control thread's Kafka client).
 * Blocking (getaddrinfo): call it at start or on a reconnect, never per
 * request.
 *
 * IPv4 only: the kernel backend's listener and both backends' fetch
 * sessions take dotted quads, so an IPv6 literal is refused as what it is
 * (-EAFNOSUPPORT, "IPv6 is not supported yet") rather than looked up and
 * reported as an unreachable host. A name that does not resolve is
 * KM_ERESOLVE, with getaddrinfo's own words in `why` when asked for.
 */
#ifndef KM_COMMON_RESOLVE_H
#define KM_COMMON_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for km_resolve_ipv4_why's sentence: a 253-byte host name plus
 * getaddrinfo's message. */
#define KM_RESOLVE_WHY_BYTES 384

/** True if host is an IPv6 literal ("::1", "fd00::2"; no brackets). */
bool km_resolve_is_ipv6(const char *host);

/**
 * Resolve host to a dotted quad in out (cap bytes, INET_ADDRSTRLEN is
 * enough).
 * @return 0; -EAFNOSUPPORT for an IPv6 literal; KM_ERESOLVE when
 *         getaddrinfo finds no IPv4 address for the name.
 */
int km_resolve_ipv4(const char *host, char *out, size_t cap);

/**
 * km_resolve_ipv4, and on failure one sentence for an operator in why:
 * "cannot resolve host 'foo': Name or service not known" or
 * "'::1' is an IPv6 address: IPv6 is not supported yet".
 */
int km_resolve_ipv4_why(const char *host, char *out, size_t cap, char *why,
			size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
