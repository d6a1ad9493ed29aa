/* Deadlines and blocking TCP I/O for tests that talk Kafka by hand
 * (tests/rdkafka/raw_kafka.cc, tests/wire/test_wire_mock.cc): connect,
 * send and receive exactly n bytes, each bounded by poll() and a deadline,
 * errors as text ("" = ok).
 *
 * Header-only on purpose: suites compile tests/rdkafka/raw_kafka.cc into
 * their own binaries, with or without linking the support library.
 */
#ifndef KM_TESTS_SUPPORT_BLOCKING_IO_H
#define KM_TESTS_SUPPORT_BLOCKING_IO_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kmtest {

using Clock = std::chrono::steady_clock;

inline Clock::time_point deadline_in(int ms)
{
	return Clock::now() + std::chrono::milliseconds(ms);
}

/* Milliseconds until deadline, 0 once it passed. */
inline int ms_left(Clock::time_point deadline)
{
	auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
		deadline - Clock::now());
	return left.count() > 0 ? (int)left.count() : 0;
}

/* "host:port" of the first entry of a bootstrap list such as librdkafka's
 * mock cluster returns ("127.0.0.1:PORT,..."). Returns false if malformed. */
inline bool parse_bootstrap(const std::string &bootstraps, std::string *host,
			    uint16_t *port)
{
	std::string first = bootstraps.substr(0, bootstraps.find(','));
	size_t colon = first.rfind(':');
	unsigned long p;
	char *end = nullptr;

	if (colon == std::string::npos || colon == 0)
		return false;
	p = strtoul(first.c_str() + colon + 1, &end, 10);
	if (*end != '\0' || p == 0 || p > 65535)
		return false;
	*host = first.substr(0, colon);
	*port = (uint16_t)p;
	return true;
}

/* A non-blocking TCP connection to an IPv4 literal, TCP_NODELAY, within
 * timeout_ms. On success *fd is the socket (the caller closes it); on
 * failure *fd is closed and -1. */
inline std::string tcp_connect(const std::string &host, uint16_t port,
			       int timeout_ms, int *fd)
{
	struct sockaddr_in sa;
	struct pollfd pfd;
	int err = 0, one = 1;
	socklen_t errlen = sizeof(err);
	std::string why;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	*fd = -1;
	if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
		return "not an IPv4 literal: " + host;
	*fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return std::string("socket: ") + strerror(errno);
	setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (::connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return "";
	if (errno != EINPROGRESS)
		why = std::string("connect: ") + strerror(errno);
	pfd = { *fd, POLLOUT, 0 };
	if (why.empty() && poll(&pfd, 1, timeout_ms) != 1)
		why = "connect timed out";
	if (why.empty())
		getsockopt(*fd, SOL_SOCKET, SO_ERROR, &err, &errlen);
	if (why.empty() && err)
		why = std::string("connect: ") + strerror(err);
	if (!why.empty()) {
		close(*fd);
		*fd = -1;
	}
	return why;
}

/* Send (or receive) exactly len bytes on a non-blocking socket before the
 * deadline. */
inline std::string io_all(int fd, uint8_t *buf, size_t len, bool sending,
			  Clock::time_point deadline)
{
	size_t done = 0;

	while (done < len) {
		struct pollfd pfd = { fd, (short)(sending ? POLLOUT : POLLIN),
				      0 };
		int left = ms_left(deadline);
		int rc = left > 0 ? poll(&pfd, 1, left) : 0;
		ssize_t n;

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return std::string("poll: ") + strerror(errno);
		if (rc == 0)
			return sending ? "send timed out" : "receive timed out";
		n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
			    : recv(fd, buf + done, len - done, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return std::string(sending ? "send: " : "recv: ") +
			       strerror(errno);
		if (n == 0)
			return "connection closed by peer";
		done += (size_t)n;
	}
	return "";
}

/* sendmsg() all of iov[0..n) on a non-blocking socket before the deadline,
 * picking up after partial sends. iov is consumed (advanced) in place. */
inline std::string sendmsg_all(int fd, struct iovec *iov, size_t n,
			       Clock::time_point deadline)
{
	while (n > 0) {
		struct msghdr mh = {};
		struct pollfd pfd = { fd, POLLOUT, 0 };
		ssize_t k;

		mh.msg_iov = iov;
		mh.msg_iovlen = n;
		k = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (k < 0 && errno != EINTR && errno != EAGAIN)
			return std::string("sendmsg: ") + strerror(errno);
		if (k < 0 && errno == EAGAIN &&
		    poll(&pfd, 1, ms_left(deadline)) == 0)
			return "send timed out";
		for (; k > 0 && n > 0; iov++, n--) {
			if ((size_t)k < iov->iov_len) {
				iov->iov_base = (uint8_t *)iov->iov_base + k;
				iov->iov_len -= (size_t)k;
				break;
			}
			k -= (ssize_t)iov->iov_len;
		}
		while (n > 0 && iov->iov_len == 0) {
			iov++;
			n--;
		}
	}
	return "";
}

} // namespace kmtest

#endif
