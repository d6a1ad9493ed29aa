/* kmirrorctl: the thin client of kmirrord's control socket (DESIGN.md,
 * "Interfaces"; control/ctlproto.h has the protocol).
 *
 *   kmirrorctl [--socket PATH] VERB [args] [--json]
 *
 * It validates the arguments, sends one request line, prints progress lines
 * as they come and then the result: human-readable by default, the raw JSON
 * lines with --json, the Prometheus text as-is for metrics.
 * Exit status: 0 ok; 1 the daemon refused (reason and code printed);
 * 2 usage error; 3 cannot connect or the connection broke.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "control/ctlproto.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3
#define ARGS_MAX 4096

static const char usage_text[] =
	"usage: kmirrorctl [--socket PATH] VERB [args] [--json]\n"
	"  status\n"
	"  start TOPIC[:PARTITION]... [--truncate-to N | --from-start]\n"
	"  stop (--all | TOPIC[:PARTITION]...) [--mode truncate|abort]\n"
	"       [--planned [--timeout-ms N]]  (--planned: wait until caught up\n"
	"       with the source, default at most 60000 ms, else change nothing)\n"
	"  failback TOPIC[:PARTITION]... --source HOST:PORT [--truncate-to N | --from-start]\n"
	"  pause (--all | TOPIC[:PARTITION]...)\n"
	"  resume (--all | TOPIC[:PARTITION]...)\n"
	"  metrics\n"
	"  throttle RATE [--topic TOPIC]   (bytes/s, K/M/G: powers of 1024; 0: no cap)\n"
	"The socket is PATH, else $KMIRROR_SOCKET, else ./kmirrord.sock\n"
	"(kmirrord's default is <data.dir>/kmirrord.sock).\n";

struct opts {
	const char *socket;
	const char *verb;
	const char *parts[ARGS_MAX];
	unsigned parts_count;
	const char *truncate_to, *mode, *source, *topic, *timeout_ms;
	bool json, all, from_start, planned;
};

static int usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kmirrorctl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_text);
	return EXIT_USAGE;
}

/* The value of an option: "--opt=V" or the next argument. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

static bool is_opt(const char *arg, const char *name)
{
	size_t n = strlen(name);

	return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* @return 0, or EXIT_USAGE (message printed); -1 for --help. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const char *const valued[] = { "--socket", "--truncate-to",
					      "--mode", "--source", "--topic",
					      "--timeout-ms" };
	const char **dst[] = { &o->socket, &o->truncate_to, &o->mode,
			       &o->source, &o->topic, &o->timeout_ms };

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool done = false;

		for (unsigned k = 0; k < 6 && !done; k++) {
			if (!is_opt(a, valued[k]))
				continue;
			*dst[k] = opt_value(argc, argv, &i, valued[k]);
			if (*dst[k] == NULL)
				return usage("%s needs a value", valued[k]);
			done = true;
		}
		if (done)
			continue;
		if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (strcmp(a, "--all") == 0)
			o->all = true;
		else if (strcmp(a, "--from-start") == 0)
			o->from_start = true;
		else if (strcmp(a, "--planned") == 0)
			o->planned = true;
		else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return -1;
		else if (a[0] == '-' && a[1] != '\0')
			return usage("unknown option '%s'", a);
		else if (o->verb == NULL)
			o->verb = a;
		else if (o->parts_count < ARGS_MAX)
			o->parts[o->parts_count++] = a;
		else
			return usage("more than %s partitions", "4096");
	}
	if (o->verb == NULL)
		return usage("%s", "no VERB given");
	return 0;
}

/* Whether each option given is one the verb takes. */
static int check_verb_opts(int verb, const struct opts *o)
{
	bool parts_ok = verb != KM_CTL_STATUS && verb != KM_CTL_METRICS;
	bool all_ok = verb == KM_CTL_STOP || verb == KM_CTL_PAUSE ||
		      verb == KM_CTL_RESUME;

	if (o->parts_count > 0 && !parts_ok)
		return usage("%s takes no TOPIC arguments", o->verb);
	if (o->all && !all_ok)
		return usage("%s takes no --all", o->verb);
	if ((o->truncate_to || o->from_start) && verb != KM_CTL_START &&
	    verb != KM_CTL_FAILBACK)
		return usage("%s takes no --truncate-to/--from-start", o->verb);
	if (o->truncate_to && o->from_start)
		return usage("%s", "--truncate-to and --from-start exclude each other");
	if (o->mode && verb != KM_CTL_STOP)
		return usage("%s takes no --mode", o->verb);
	if (o->source && verb != KM_CTL_FAILBACK)
		return usage("%s takes no --source", o->verb);
	if (o->planned && verb != KM_CTL_STOP)
		return usage("%s takes no --planned", o->verb);
	if (o->timeout_ms && !o->planned)
		return usage("%s", "--timeout-ms goes with stop --planned");
	if (parts_ok && o->parts_count == 0 && !o->all)
		return usage(all_ok ? "%s needs --all or TOPIC[:PARTITION]..."
				    : "%s needs TOPIC[:PARTITION]...",
			     o->verb);
	if (o->all && o->parts_count > 0)
		return usage("%s: give --all or partitions, not both", o->verb);
	if (verb == KM_CTL_FAILBACK && o->source == NULL)
		return usage("%s needs --source HOST:PORT", o->verb);
	return 0;
}

static int add_timeout(json_t *req, const char *text)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 ||
	    v > INT32_MAX)
		return usage("--timeout-ms wants 0..2147483647, not '%s'", text);
	json_object_set_new(req, "timeout_ms", json_integer(v));
	return 0;
}

static int add_values(json_t *req, const struct opts *o)
{
	char err[512];

	if (o->truncate_to) {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(o->truncate_to, &end, 10);
		if (o->truncate_to[0] < '0' || o->truncate_to[0] > '9' ||
		    *end != '\0' || errno != 0)
			return usage("--truncate-to wants an offset >= 0, not '%s'",
				     o->truncate_to);
		json_object_set_new(req, "truncate_to", json_integer(v));
	}
	if (o->from_start)
		json_object_set_new(req, "from_start", json_true());
	if (o->mode) {
		if (strcmp(o->mode, "truncate") != 0 &&
		    strcmp(o->mode, "abort") != 0)
			return usage("--mode wants truncate or abort, not '%s'",
				     o->mode);
		json_object_set_new(req, "mode", json_string(o->mode));
	}
	if (o->source) {
		if (km_ctlproto_hostport_check(o->source, err, sizeof(err)) < 0)
			return usage("--source: %s", err);
		json_object_set_new(req, "source", json_string(o->source));
	}
	if (o->all)
		json_object_set_new(req, "all", json_true());
	if (o->planned)
		json_object_set_new(req, "planned", json_true());
	return o->timeout_ms ? add_timeout(req, o->timeout_ms) : 0;
}

/* RATE: bytes per second, with K, M or G (KiB, MiB, GiB: powers of 1024
 * as the configuration's sizes). @return 0, or -1. */
static int parse_rate(const char *s, long long *out)
{
	static const char *const units[] = { "K", "M", "G" };
	char *end;
	long long v;
	int shift = 0;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || errno != 0)
		return -1;
	for (int u = 0; u < 3 && *end != '\0'; u++)
		if (strcasecmp(end, units[u]) == 0 ||
		    (strncasecmp(end, units[u], 1) == 0 &&
		     strcasecmp(end + 1, "iB") == 0))
			shift = 10 * (u + 1);
	if ((*end != '\0' && shift == 0) || v > (KM_CTLPROTO_RATE_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

/* throttle RATE [--topic T]: its own shape (RATE is no partition). */
static int throttle_request(const struct opts *o, json_t **req)
{
	long long rate;

	if (o->parts_count != 1 || o->all || o->truncate_to || o->from_start ||
	    o->mode || o->source)
		return usage("%s", "throttle takes RATE and at most --topic TOPIC");
	if (parse_rate(o->parts[0], &rate) < 0)
		return usage("throttle wants a rate in bytes per second (K, M, G: "
			     "powers of 1024; at most 1T), not '%s'", o->parts[0]);
	*req = json_pack("{s:s, s:I}", "cmd", o->verb, "rate", (json_int_t)rate);
	if (o->topic != NULL)
		json_object_set_new(*req, "topic", json_string(o->topic));
	return 0;
}

/* The request for o; *req NULL on a usage error (printed, returned). */
static int build_request(const struct opts *o, json_t **req)
{
	char topic[KM_CTLPROTO_TOPIC_BYTES_MAX], err[512];
	int verb = km_ctlproto_verb_parse(o->verb);
	json_t *parts;
	int32_t part;
	int rc;

	*req = NULL;
	if (verb < 0)
		return usage("unknown verb '%s'", o->verb);
	if (verb == KM_CTL_THROTTLE)
		return throttle_request(o, req);
	if (o->topic != NULL)
		return usage("%s takes no --topic", o->verb);
	rc = check_verb_opts(verb, o);
	if (rc != 0)
		return rc;
	*req = json_pack("{s:s}", "cmd", o->verb);
	parts = json_array();
	for (unsigned i = 0; i < o->parts_count; i++) {
		if (km_ctlproto_partition_parse(o->parts[i], topic, &part, err,
						sizeof(err)) < 0) {
			rc = usage("%s", err);
			goto out_free;
		}
		json_array_append_new(parts, json_string(o->parts[i]));
	}
	if (o->parts_count > 0)
		json_object_set(*req, "partitions", parts);
	rc = add_values(*req, o);
out_free:
	json_decref(parts);
	if (rc != 0) {
		json_decref(*req);
		*req = NULL;
	}
	return rc;
}

static int connect_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "kmirrorctl: cannot connect to %s: %s\n", path,
			strerror(ENAMETOOLONG));
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "kmirrorctl: cannot connect to %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) { /* bounded: n bytes */
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A scalar as text: strings bare, null "-", the rest compact JSON. */
static void print_value(FILE *f, const json_t *v, int width)
{
	char *text;

	if (json_is_string(v)) {
		fprintf(f, "%-*s", width, json_string_value(v));
	} else if (v == NULL || json_is_null(v)) {
		fprintf(f, "%-*s", width, "-");
	} else if (json_is_real(v)) {
		fprintf(f, "%-*.1f", width, json_real_value(v));
	} else {
		text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		fprintf(f, "%-*s", width, text ? text : "?");
		free(text);
	}
}

static int value_width(const json_t *v)
{
	char buf[64];
	char *text;
	int n;

	if (json_is_string(v))
		return (int)strlen(json_string_value(v));
	if (v == NULL || json_is_null(v))
		return 1;
	if (json_is_real(v))
		return snprintf(buf, sizeof(buf), "%.1f", json_real_value(v));
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	n = text ? (int)strlen(text) : 1;
	free(text);
	return n;
}

static const char *const preferred_cols[] = {
	"throttle", "group", "partition", "state", "leo", "hw", "lso", "lag", "records_per_sec",
	"bytes_per_sec",
};
#define COLS_MAX 32

/* Columns: the usual status fields first, then any others as they come. */
static unsigned table_columns(const json_t *rows, const char **cols)
{
	unsigned n = 0;
	const char *key;
	json_t *row, *v;
	size_t i;

	for (size_t p = 0; p < sizeof(preferred_cols) / sizeof(*preferred_cols); p++)
		json_array_foreach(rows, i, row)
			if (json_object_get(row, preferred_cols[p])) {
				cols[n++] = preferred_cols[p];
				break;
			}
	json_array_foreach(rows, i, row) {
		json_object_foreach(row, key, v) {
			unsigned c;

			for (c = 0; c < n && strcmp(cols[c], key) != 0; c++)
				;
			if (c == n && n < COLS_MAX)
				cols[n++] = key;
		}
	}
	return n;
}

static void header_name(const char *key, char *out, size_t len)
{
	size_t i;

	if (strcmp(key, "bytes_per_sec") == 0)
		key = "bytes/s";
	else if (strcmp(key, "records_per_sec") == 0)
		key = "records/s";
	for (i = 0; key[i] != '\0' && i + 1 < len; i++)
		out[i] = (key[i] >= 'a' && key[i] <= 'z') ? (char)(key[i] - 32)
							  : key[i];
	out[i] = '\0';
}

static void print_table(const json_t *rows)
{
	const char *cols[COLS_MAX];
	int width[COLS_MAX];
	char head[64];
	unsigned n = table_columns(rows, cols);
	json_t *row;
	size_t i;

	for (unsigned c = 0; c < n; c++) {
		header_name(cols[c], head, sizeof(head));
		width[c] = (int)strlen(head);
		json_array_foreach(rows, i, row) {
			int w = value_width(json_object_get(row, cols[c]));

			width[c] = w > width[c] ? w : width[c];
		}
	}
	for (unsigned c = 0; c < n; c++) {
		header_name(cols[c], head, sizeof(head));
		printf("%-*s%s", c + 1 < n ? width[c] : 0, head,
		       c + 1 < n ? "  " : "\n");
	}
	json_array_foreach(rows, i, row) {
		for (unsigned c = 0; c < n; c++) {
			print_value(stdout, json_object_get(row, cols[c]),
				    c + 1 < n ? width[c] : 0);
			fputs(c + 1 < n ? "  " : "\n", stdout);
		}
	}
}

static bool is_table(const json_t *v)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return false;
	json_array_foreach(v, i, e)
		if (!json_is_object(e))
			return false;
	return true;
}

/* The ok reply, human-readable: scalars as "key: value", arrays of
 * objects as tables, metrics "text" as-is. */
static void print_ok(const char *verb, const json_t *resp)
{
	const char *key;
	json_t *v;
	bool any = false;

	if (strcmp(verb, "metrics") == 0 &&
	    json_is_string(json_object_get(resp, "text"))) {
		fputs(json_string_value(json_object_get(resp, "text")), stdout);
		return;
	}
	json_object_foreach((json_t *)resp, key, v) {
		if (strcmp(key, "ok") == 0 || strcmp(key, "id") == 0 ||
		    is_table(v))
			continue;
		printf("%s: ", key);
		print_value(stdout, v, 0);
		putchar('\n');
		any = true;
	}
	json_object_foreach((json_t *)resp, key, v) {
		if (!is_table(v) || strcmp(key, "id") == 0)
			continue;
		if (any)
			putchar('\n');
		print_table(v);
		any = true;
	}
	if (!any)
		printf("%s: ok\n", verb);
}

static void print_progress(const json_t *p)
{
	const json_t *msg = json_object_get(p, "message");
	char *text;

	if (json_is_string(msg)) {
		printf("... %s\n", json_string_value(msg));
	} else {
		text = json_dumps(p, JSON_COMPACT | JSON_ENCODE_ANY);
		printf("... %s\n", text ? text : "?");
		free(text);
	}
	fflush(stdout);
}

/* One reply line. @return -1 for progress (keep reading), else the exit
 * status. */
static int handle_line(const struct opts *o, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, 0, &jerr);
	const json_t *err;
	int rc = EXIT_SUCCESS;

	if (!json_is_object(msg)) {
		fprintf(stderr, "kmirrorctl: bad reply from %s: %s\n",
			o->socket, msg ? "not an object" : jerr.text);
		json_decref(msg);
		return EXIT_CONNECT;
	}
	if (o->json) {
		fwrite(line, 1, len, stdout);
		putchar('\n');
		fflush(stdout);
	}
	if (json_object_get(msg, "progress") != NULL &&
	    json_object_get(msg, "ok") == NULL) {
		if (!o->json)
			print_progress(json_object_get(msg, "progress"));
		json_decref(msg);
		return -1;
	}
	if (json_is_true(json_object_get(msg, "ok"))) {
		if (!o->json)
			print_ok(o->verb, msg);
	} else {
		err = json_object_get(msg, "error");
		fprintf(stderr, "kmirrorctl: %s refused: %s (%s, code %lld)\n",
			o->verb,
			json_string_value(json_object_get(err, "message")) ?: "?",
			json_string_value(json_object_get(err, "name")) ?: "?",
			(long long)json_integer_value(json_object_get(err, "code")));
		rc = EXIT_REFUSED;
	}
	json_decref(msg);
	return rc;
}

/* Read lines until the final one. @return the exit status. */
static int read_replies(int fd, const struct opts *o)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = malloc(cap), *nl;
	int rc = -1;

	while (buf != NULL && rc < 0) { /* bounded: REPLY_BYTES_MAX per line */
		nl = memchr(buf, '\n', len);
		if (nl != NULL) {
			rc = handle_line(o, buf, (size_t)(nl - buf));
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
			continue;
		}
		if (len == cap) {
			char *bigger = cap < KM_CTLPROTO_REPLY_BYTES_MAX
					       ? realloc(buf, cap * 2) : NULL;

			if (bigger == NULL) {
				fprintf(stderr, "kmirrorctl: reply line too long\n");
				rc = EXIT_CONNECT;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t n = recv(fd, buf + len, cap - len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "kmirrorctl: connection to %s %s before the reply\n",
				o->socket, n == 0 ? "closed" : strerror(errno));
			rc = EXIT_CONNECT;
		} else {
			len += (size_t)n;
		}
	}
	free(buf);
	return rc < 0 ? EXIT_CONNECT : rc;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	json_t *req;
	char *text;
	int rc, fd;

	rc = parse_args(argc, argv, &o);
	if (rc < 0) {
		fputs(usage_text, stdout);
		return EXIT_SUCCESS;
	}
	if (rc != 0)
		return rc;
	rc = build_request(&o, &req);
	if (rc != 0)
		return rc;
	if (o.socket == NULL)
		o.socket = getenv("KMIRROR_SOCKET");
	if (o.socket == NULL || o.socket[0] == '\0')
		o.socket = "kmirrord.sock";
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	fd = connect_socket(o.socket);
	if (fd < 0) {
		free(text);
		return EXIT_CONNECT;
	}
	if (text == NULL || send_all(fd, text, strlen(text)) < 0 ||
	    send_all(fd, "\n", 1) < 0) {
		int err = errno;

		/* A daemon that refuses a client at once (busy, or not a user
		 * allowed to control it) may close before the request went
		 * out: its answer waits in our socket, and says why. */
		rc = err == EPIPE || err == ECONNRESET ? read_replies(fd, &o)
						       : EXIT_CONNECT;
		if (rc == EXIT_CONNECT)
			fprintf(stderr, "kmirrorctl: cannot send to %s: %s\n",
				o.socket, strerror(err));
	} else {
		rc = read_replies(fd, &o);
	}
	free(text);
	close(fd);
	return rc;
}
