/* Host name to IPv4 literal, for the sockets that take one (fetch
 * sessions, the Kafka listener). Blocking (getaddrinfo): call it at start
 * or on a reconnect, never per request. */
#ifndef KM_COMMON_RESOLVE_H
#define KM_COMMON_RESOLVE_H

#include <stddef.h>

/** @return 0 with the dotted quad in out, or -EHOSTUNREACH. */
int km_resolve_ipv4(const char *host, char *out, size_t cap);

#endif
