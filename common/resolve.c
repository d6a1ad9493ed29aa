#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>

#include "common/resolve.h"

int km_resolve_ipv4(const char *host, char *out, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;

	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return -EHOSTUNREACH;
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr,
		  out, (socklen_t)cap);
	freeaddrinfo(res);
	return 0;
}
