/* kmirror-mock-source: librdkafka's mock cluster (rdkafka_mock.h) kept alive
 * in its own process, so a shell script or a test can use a Kafka source
 * cluster it started itself (spec/test-peers.md lists its quirks).
 *
 *   kmirror-mock-source [--brokers N] [--topic NAME:PARTITIONS[:RF]]...
 *                       [--leader TOPIC:PARTITION:BROKER]...
 *                       [--ready-file PATH] [--exit-with-parent]
 *
 * When the cluster is up it prints exactly one line,
 * `bootstrap=127.0.0.1:P1,...`, to stdout (flushed), then writes the same
 * line to PATH through a temporary file and a rename, so a script can wait
 * for PATH to appear. It runs until SIGTERM or SIGINT, then destroys the
 * cluster and exits 0. Exit status: 0 ok; 1 the cluster could not be set
 * up; 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/file.h"

#define EXIT_SETUP 1
#define EXIT_USAGE 2
#define BROKERS_MAX 32
#define TOPICS_MAX 64
#define LEADERS_MAX 256
#define PARTITIONS_MAX 1000
/* Kafka's topic name limit (kafka.common.Topic.maxNameLength) + NUL. */
#define TOPIC_NAME_BYTES_MAX 250

static const char usage_text[] =
	"usage: kmirror-mock-source [--brokers N] [--topic NAME:PARTITIONS[:RF]]...\n"
	"                           [--leader TOPIC:PARTITION:BROKER]...\n"
	"                           [--ready-file PATH] [--exit-with-parent]\n"
	"  --brokers N        mock brokers, ids 1..N (default 3, at most 32)\n"
	"  --topic T:P[:RF]   create topic T with P partitions, replication RF\n"
	"                     (default 1; librdkafka 2.0.2's mock gives every\n"
	"                     partition min(3, N) replicas whatever RF says);\n"
	"                     repeatable\n"
	"  --leader T:P:B     move partition P of T to broker B at start\n"
	"  --ready-file PATH  also write the bootstrap line to PATH (atomically)\n"
	"  --exit-with-parent stop (as on SIGTERM) when the parent process dies\n"
	"Prints `bootstrap=HOST:PORT,...` once the cluster is up, runs until\n"
	"SIGTERM or SIGINT, exits 0.\n";

struct topic_spec {
	char name[TOPIC_NAME_BYTES_MAX];
	int partitions;
	int replication;
};

struct leader_spec {
	char topic[TOPIC_NAME_BYTES_MAX];
	int32_t partition;
	int32_t broker;
};

struct opts {
	int brokers;
	struct topic_spec topics[TOPICS_MAX];
	unsigned topics_count;
	struct leader_spec leaders[LEADERS_MAX];
	unsigned leaders_count;
	const char *ready_file;
	bool exit_with_parent;
};

static int usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kmirror-mock-source: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_text);
	return EXIT_USAGE;
}

/* A decimal in [lo, hi], the whole of s up to `stop` (or its end). */
static bool parse_int(const char *s, const char *stop, long lo, long hi,
		      long *out)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || (stop ? end != stop : *end != '\0'))
		return false;
	if (v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* Kafka's topic name rules: 1..249 of [a-zA-Z0-9._-], not "." or "..". */
static bool topic_name_ok(const char *s, size_t len)
{
	if (len == 0 || len >= TOPIC_NAME_BYTES_MAX)
		return false;
	if ((len == 1 && s[0] == '.') || (len == 2 && !strncmp(s, "..", 2)))
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\0' ||
		    !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-", s[i]))
			return false;
	return true;
}

static const struct topic_spec *find_topic(const struct opts *o,
					   const char *name)
{
	for (unsigned i = 0; i < o->topics_count; i++)
		if (strcmp(o->topics[i].name, name) == 0)
			return &o->topics[i];
	return NULL;
}

/* "NAME:PARTITIONS[:RF]" */
static int parse_topic(struct opts *o, const char *arg)
{
	const char *c1 = strchr(arg, ':'), *c2;
	struct topic_spec *t = &o->topics[o->topics_count];
	long v;

	if (o->topics_count == TOPICS_MAX)
		return usage("more than %s --topic", "64");
	if (!c1 || !topic_name_ok(arg, (size_t)(c1 - arg)))
		return usage("--topic wants NAME:PARTITIONS[:RF] with a Kafka "
			     "topic name, not '%s'", arg);
	memcpy(t->name, arg, (size_t)(c1 - arg));
	t->name[c1 - arg] = '\0';
	if (find_topic(o, t->name))
		return usage("topic '%s' given twice", t->name);
	c2 = strchr(c1 + 1, ':');
	if (!parse_int(c1 + 1, c2, 1, PARTITIONS_MAX, &v))
		return usage("--topic '%s': PARTITIONS must be 1..1000", arg);
	t->partitions = (int)v;
	t->replication = 1;
	if (c2 && !parse_int(c2 + 1, NULL, 1, BROKERS_MAX, &v))
		return usage("--topic '%s': RF must be 1..32", arg);
	if (c2)
		t->replication = (int)v;
	o->topics_count++;
	return 0;
}

/* "TOPIC:PARTITION:BROKER"; checked against the topics once all are read. */
static int parse_leader(struct opts *o, const char *arg)
{
	const char *c2 = strrchr(arg, ':'), *c1;
	struct leader_spec *l = &o->leaders[o->leaders_count];
	long part, broker;

	if (o->leaders_count == LEADERS_MAX)
		return usage("more than %s --leader", "256");
	c1 = c2 ? memrchr(arg, ':', (size_t)(c2 - arg)) : NULL;
	if (!c1 || !topic_name_ok(arg, (size_t)(c1 - arg)) ||
	    !parse_int(c1 + 1, c2, 0, PARTITIONS_MAX - 1, &part) ||
	    !parse_int(c2 + 1, NULL, 1, BROKERS_MAX, &broker))
		return usage("--leader wants TOPIC:PARTITION:BROKER, not '%s'",
			     arg);
	memcpy(l->topic, arg, (size_t)(c1 - arg));
	l->topic[c1 - arg] = '\0';
	l->partition = (int32_t)part;
	l->broker = (int32_t)broker;
	o->leaders_count++;
	return 0;
}

/* Every --leader names a created partition and an existing broker, and
 * every RF fits the broker count. */
static int check_opts(const struct opts *o)
{
	char what[TOPIC_NAME_BYTES_MAX + 64];

	for (unsigned i = 0; i < o->topics_count; i++)
		if (o->topics[i].replication > o->brokers)
			return usage("topic '%s': replication is more than "
				     "--brokers", o->topics[i].name);
	for (unsigned i = 0; i < o->leaders_count; i++) {
		const struct leader_spec *l = &o->leaders[i];
		const struct topic_spec *t = find_topic(o, l->topic);

		snprintf(what, sizeof(what), "%s:%d:%d", l->topic,
			 (int)l->partition, (int)l->broker);
		if (!t)
			return usage("--leader '%s': no --topic of that name",
				     what);
		if (l->partition >= t->partitions)
			return usage("--leader '%s': no such partition", what);
		if (l->broker > o->brokers)
			return usage("--leader '%s': no such broker", what);
	}
	return 0;
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

/* One option at argv[*i]. @return 0, EXIT_USAGE (printed), -1 for --help. */
static int parse_one(int argc, char **argv, int *i, struct opts *o)
{
	static const char *const valued[] = { "--brokers", "--topic",
					      "--leader", "--ready-file" };
	const char *a = argv[*i], *v = NULL;
	unsigned k;
	long n;

	if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
		return -1;
	if (strcmp(a, "--exit-with-parent") == 0) {
		o->exit_with_parent = true;
		return 0;
	}
	for (k = 0; k < 4 && !is_opt(a, valued[k]); k++)
		;
	if (k == 4)
		return usage("unknown argument '%s'", a);
	v = opt_value(argc, argv, i, valued[k]);
	if (v == NULL)
		return usage("%s needs a value", valued[k]);
	if (k == 1)
		return parse_topic(o, v);
	if (k == 2)
		return parse_leader(o, v);
	if (k == 3) {
		o->ready_file = v;
		return *v ? 0 : usage("%s", "--ready-file needs a path");
	}
	if (!parse_int(v, NULL, 1, BROKERS_MAX, &n))
		return usage("--brokers must be 1..32, not '%s'", v);
	o->brokers = (int)n;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	o->brokers = 3;
	for (int i = 1; i < argc; i++) {
		int rc = parse_one(argc, argv, &i, o);

		if (rc != 0)
			return rc;
	}
	return check_opts(o);
}

/* Write line to path via a temporary file in the same directory. */
static int write_ready_file(const char *path, const char *line)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int dfd, rc;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	rc = km_file_write_atomic(dfd, slash ? slash + 1 : path, line,
				  strlen(line));
	close(dfd);
	return rc;
}

static int create_topics(rd_kafka_mock_cluster_t *mc, const struct opts *o)
{
	for (unsigned i = 0; i < o->topics_count; i++) {
		const struct topic_spec *t = &o->topics[i];
		rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(
			mc, t->name, t->partitions, t->replication);

		if (err) {
			fprintf(stderr, "kmirror-mock-source: topic %s: %s\n",
				t->name, rd_kafka_err2str(err));
			return -1;
		}
	}
	for (unsigned i = 0; i < o->leaders_count; i++) {
		const struct leader_spec *l = &o->leaders[i];
		rd_kafka_resp_err_t err = rd_kafka_mock_partition_set_leader(
			mc, l->topic, l->partition, l->broker);

		if (err) {
			fprintf(stderr, "kmirror-mock-source: leader %s:%d: %s\n",
				l->topic, (int)l->partition,
				rd_kafka_err2str(err));
			return -1;
		}
	}
	return 0;
}

/* The rd_kafka_t the mock lives in; it never connects anywhere. */
static rd_kafka_t *host_new(void)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char errstr[256];
	rd_kafka_t *rk;

	if (rd_kafka_conf_set(conf, "log_level", "3", errstr,
			      sizeof(errstr)) != RD_KAFKA_CONF_OK) {
		rd_kafka_conf_destroy(conf);
		fprintf(stderr, "kmirror-mock-source: %s\n", errstr);
		return NULL;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL) {
		rd_kafka_conf_destroy(conf);
		fprintf(stderr, "kmirror-mock-source: rd_kafka_new: %s\n",
			errstr);
	}
	return rk;
}

/* Print the bootstrap line and write the ready file. @return 0 or -1. */
static int announce(rd_kafka_mock_cluster_t *mc, const struct opts *o)
{
	char line[4096];
	int n = snprintf(line, sizeof(line), "bootstrap=%s\n",
			 rd_kafka_mock_cluster_bootstraps(mc));
	int rc;

	if (n < 0 || (size_t)n >= sizeof(line)) {
		fprintf(stderr, "kmirror-mock-source: bootstrap list too long\n");
		return -1;
	}
	if (fputs(line, stdout) == EOF || fflush(stdout) == EOF) {
		fprintf(stderr, "kmirror-mock-source: stdout: %s\n",
			strerror(errno));
		return -1;
	}
	if (o->ready_file == NULL)
		return 0;
	rc = write_ready_file(o->ready_file, line);
	if (rc < 0)
		fprintf(stderr, "kmirror-mock-source: --ready-file %s: %s\n",
			o->ready_file, strerror(-rc));
	return rc < 0 ? -1 : 0;
}

/* Block the stop signals in every thread (librdkafka's inherit the mask
 * from this one), so that only the sigwaitinfo() in main takes them. */
static void block_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* PR_SET_PDEATHSIG fires on the parent's death only after this call: a
 * parent already gone (we were reparented) means stop now. */
static void tie_to_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		raise(SIGTERM);
}

int main(int argc, char **argv)
{
	static struct opts o;
	pid_t parent = getppid();
	rd_kafka_mock_cluster_t *mc = NULL;
	rd_kafka_t *rk;
	sigset_t stop;
	int rc = parse_args(argc, argv, &o);

	if (rc < 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (rc != 0)
		return rc;
	block_stop_signals(&stop);
	if (o.exit_with_parent)
		tie_to_parent(parent);
	rk = host_new();
	if (rk)
		mc = rd_kafka_mock_cluster_new(rk, o.brokers);
	if (rk && mc == NULL)
		fprintf(stderr, "kmirror-mock-source: "
				"rd_kafka_mock_cluster_new failed\n");
	rc = mc ? create_topics(mc, &o) : -1;
	if (rc == 0)
		rc = announce(mc, &o);
	/* The only unbounded wait: this process exists to wait for a signal. */
	while (rc == 0 && sigwaitinfo(&stop, NULL) < 0 && errno == EINTR)
		;
	if (mc)
		rd_kafka_mock_cluster_destroy(mc);
	if (rk)
		rd_kafka_destroy(rk);
	return rc == 0 ? 0 : EXIT_SETUP;
}
