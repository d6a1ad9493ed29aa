#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>

#include "common/errors.h"
#include "common/resolve.h"

bool km_resolve_is_ipv6(const char *host)
{
	struct in6_addr a;

	return inet_pton(AF_INET6, host, &a) == 1;
}

/* getaddrinfo's reason, EAI_SYSTEM's errno included. */
static const char *gai_reason(int gai, int saved_errno)
{
	if (gai == EAI_SYSTEM)
		return km_strerror(-saved_errno);
	return gai_strerror(gai);
}

int km_resolve_ipv4_why(const char *host, char *out, size_t cap, char *why,
			size_t why_len)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int gai;

	if (km_resolve_is_ipv6(host)) {
		if (why != NULL)
			snprintf(why, why_len, "'%s' is an IPv6 address: IPv6 "
				 "is not supported yet", host);
		return -EAFNOSUPPORT;
	}
	gai = getaddrinfo(host, NULL, &hints, &res);
	if (gai != 0) {
		/* EAI_NONAME, EAI_AGAIN, EAI_NODATA (the name has no IPv4
		 * address)...: a name problem, never a routing one. */
		if (why != NULL)
			snprintf(why, why_len, "cannot resolve host '%s': %s",
				 host, gai_reason(gai, errno));
		return KM_ERESOLVE;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr,
		  out, (socklen_t)cap);
	freeaddrinfo(res);
	return 0;
}

int km_resolve_ipv4(const char *host, char *out, size_t cap)
{
	return km_resolve_ipv4_why(host, out, cap, NULL, 0);
}
