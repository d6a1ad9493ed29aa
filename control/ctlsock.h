/* kmirrord's control socket server: a Unix stream socket, one JSON object
 * per line each way (control/ctlproto.h has the schema).
 *
 * Threading: one thread (the control thread) owns a struct km_ctlsock and
 * makes every call on it, handlers included. The server never blocks: it
 * exposes one fd (an epoll set: the listener, the clients and a wake-up
 * eventfd) that is readable whenever km_ctlsock_poll() has work, so the
 * control thread may fold it into its own poll loop or call
 * km_ctlsock_poll() with a timeout.
 *
 * Bounded work (STYLE 13): one step accepts at most KM_CTLSOCK_EVENTS_MAX
 * events, reads at most one buffer per client and dispatches at most
 * KM_CTLSOCK_LINES_PER_STEP lines per client; lines left over keep the fd
 * readable for the next step.
 *
 * Memory (STYLE 9): km_ctlsock_open() allocates every client's buffers
 * (clients_max * ~1.1 MiB); jansson allocates per request, which is
 * acceptable on the control thread and nowhere else.
 */
#ifndef KM_CONTROL_CTLSOCK_H
#define KM_CONTROL_CTLSOCK_H

#include <stdint.h>

#include <jansson.h>

#include "control/ctlproto.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_ctlsock;

#define KM_CTLSOCK_CLIENTS_MAX 64u /* hard cap on clients_max */
/* Unsent output per client (progress + final lines): the largest reply a
 * client reads (metrics of thousands of partitions run to megabytes) and
 * room for progress lines; a client that lets more pile up is
 * disconnected. The buffer grows to it from KM_CTLSOCK_OUT_BYTES_MIN. */
#define KM_CTLSOCK_OUT_BYTES_MAX (KM_CTLPROTO_REPLY_BYTES_MAX + 64u * 1024)
#define KM_CTLSOCK_OUT_BYTES_MIN (64u * 1024)
#define KM_CTLSOCK_EVENTS_MAX 32u
#define KM_CTLSOCK_LINES_PER_STEP 8u

/* A handler's return value: the reply will come later through
 * km_ctlsock_complete() (take the token with km_ctlsock_token() first). */
#define KM_CTLSOCK_DEFERRED 1

/**
 * A verb's handler. req is the validated request (borrowed for the call);
 * fill resp (an empty object owned by the server) with the result fields.
 * @return 0: {"ok":true, resp...} is sent;
 *         KM_CTLSOCK_DEFERRED: nothing is sent yet, and the client's later
 *           requests wait until km_ctlsock_complete();
 *         < 0 (KM_E* or -errno): {"ok":false,"error":{...}} is sent; a
 *           string "message" in resp replaces km_strerror()'s text.
 */
typedef int (*km_ctlsock_handler_fn)(void *ctx, const json_t *req,
				     json_t *resp);

/**
 * Create the socket at path (owner-only: mode 0600 whatever the umask; it
 * is bound in a private 0700 directory next to path, then renamed into
 * place). An existing socket file at path is replaced only if nothing
 * accepts connections on it.
 * @param clients_max  1..KM_CTLSOCK_CLIENTS_MAX clients at once; one more
 *                     is told KM_ECTLBUSY and closed.
 * @return 0 and *out; or
 *   -EINVAL        clients_max out of range, or path empty;
 *   -ENAMETOOLONG  path (or its temporary sibling) does not fit sun_path;
 *   -EADDRINUSE    a server already listens at path;
 *   -EEXIST        path exists and is not a socket;
 *   -ENOMEM, or the -errno of socket/bind/listen/rename/mkdtemp.
 */
int km_ctlsock_open(struct km_ctlsock **out, const char *path,
		    uint32_t clients_max);

/** Close every client, unlink path if it is still ours, free. NULL ok. */
void km_ctlsock_close(struct km_ctlsock *s);

/**
 * Set the handler of verb (replacing any). Verbs without one answer
 * KM_ECTLCMD "no handler".
 * @return 0, or -EINVAL for a verb out of range.
 */
int km_ctlsock_register(struct km_ctlsock *s, enum km_ctlproto_verb verb,
			km_ctlsock_handler_fn fn, void *ctx);

/** The fd to poll for POLLIN; valid until km_ctlsock_close(). */
int km_ctlsock_fd(const struct km_ctlsock *s);

/**
 * Wait up to timeout_ms (-1: forever, 0: not at all) and do one bounded
 * step of work: accept, read, dispatch, write.
 * @return events handled (>= 0), or -errno of epoll_wait (-EINTR
 *         included: just call again).
 */
int km_ctlsock_poll(struct km_ctlsock *s, int timeout_ms);

/** Clients connected now. */
uint32_t km_ctlsock_clients(const struct km_ctlsock *s);

/**
 * The request being handled, as a token for km_ctlsock_progress() and
 * km_ctlsock_complete(). Only inside a handler; 0 elsewhere.
 */
uint64_t km_ctlsock_token(const struct km_ctlsock *s);

/**
 * Queue {"progress":progress} (plus the request's "id") for the client of
 * token: inside the handler (token from km_ctlsock_token(), or 0 for "the
 * current request") or while a deferred request is open. Does not take
 * ownership of progress.
 * @return 0; -ENOENT (client gone or request finished; not an error for
 *         the caller's operation); -ENOBUFS (client too slow: it has been
 *         disconnected); -ENOMEM.
 */
int km_ctlsock_progress(struct km_ctlsock *s, uint64_t token,
			const json_t *progress);

/**
 * Finish a deferred request: rc and resp as a handler's return (resp may
 * be NULL; not taken). Resumes reading the client's next requests.
 * @return 0, -ENOENT (client gone: nothing sent), -ENOBUFS, -ENOMEM,
 *         -EINVAL (rc == KM_CTLSOCK_DEFERRED).
 */
int km_ctlsock_complete(struct km_ctlsock *s, uint64_t token, int rc,
			const json_t *resp);

#ifdef __cplusplus
}
#endif

#endif
