/* kmirror-produce: a real librdkafka producer for demos, tests and
 * benchmarks, writing messages whose keys, values and headers follow from
 * (--seed, partition, sequence) alone (tools/payload.h), so a reader
 * can recompute every one.
 *
 *   kmirror-produce --bootstrap HOST:PORT[,...] --topic T [options]
 *
 * Where messages go: by default round robin over every partition of T
 * (message i to partition i % P, from Metadata); --partition N sends all to
 * N; --partition -1 leaves it to librdkafka's partitioner (the key's hash),
 * and the payload's partition is then -1 and its sequence counts all
 * messages. Otherwise the sequence counts the messages aimed at a partition,
 * so on a fresh partition a message's sequence is its offset.
 *
 * It waits for every delivery report and prints one line,
 * `produced=N failed=M bytes=B seconds=S` (bytes: keys + values delivered;
 * produced + failed = --count). Transactional runs also print
 * `transactions committed=C aborted=A` on stderr. Exit status: 0 only if
 * failed=0; 1 a failure; 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "payload.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define HEADERS_MAX 64
#define FLUSH_SLACK_MS 5000
/* Values are built in one buffer, copied by librdkafka (F_COPY). */
#define VALUE_BYTES_MAX (64 * 1024 * 1024)

enum mode { MODE_PLAIN, MODE_IDEMPOTENT, MODE_TRANSACTIONAL };
enum keys { KEYS_NONE, KEYS_SEQ, KEYS_RANDOM };

static const char usage_text[] =
	"usage: kmirror-produce --bootstrap HOST:PORT[,...] --topic T [options]\n"
	"  --partition N      all to N; -1: librdkafka's partitioner\n"
	"                     (default: round robin over all partitions)\n"
	"  --count N          messages (default 100)\n"
	"  --size BYTES       value size (default 100)\n"
	"  --rate MSGS_PER_S  pace the sends; 0 = as fast as possible (default)\n"
	"  --mode plain|idempotent|transactional (default plain, acks=1)\n"
	"  --txn-size N       transactional: messages per transaction (default 100)\n"
	"  --abort-every K    transactional: flush, then abort every K-th\n"
	"                     transaction instead of committing it\n"
	"  --transactional-id ID (default kmirror-produce-<pid>)\n"
	"  --compression none|gzip|snappy|lz4|zstd (default none)\n"
	"  --keys none|seq|random (default seq)\n"
	"  --headers N        headers per message (default 0, at most 64)\n"
	"  --seed S           payload seed (default 0)\n"
	"  --linger-ms MS, --batch-size BYTES   librdkafka's linger.ms, batch.size\n"
	"  --timeout-ms MS    delivery and transaction timeout (default 30000)\n"
	"Prints `produced=N failed=M bytes=B seconds=S`; exits 0 only if M is 0.\n";

struct opts {
	const char *bootstrap, *topic, *txn_id;
	const char *compression;
	bool round_robin;
	int32_t partition;
	long long count, size, txn_size, abort_every, headers, linger_ms,
		batch_size, timeout_ms;
	unsigned long long seed;
	double rate;
	enum mode mode;
	enum keys keys;
	bool txn_size_given;
};

struct stats {
	long long delivered, failed_reports, bytes;
	long long committed, aborted;
	char first_error[256];
};

/* What a run needs while it sends. */
struct run {
	const struct opts *o;
	rd_kafka_t *rk;
	struct stats st;
	int32_t partitions; /* round robin: the topic's partition count */
	long long *seq;	    /* next sequence per partition (index 0 for -1) */
	char *value;
	struct timespec start;
};

static int usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kmirror-produce: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_text);
	return EXIT_USAGE;
}

static bool parse_ll(const char *s, long long lo, long long hi,
		     long long *out)
{
	char *end;
	long long v;

	if ((*s < '0' || *s > '9') && *s != '-')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static int parse_word(const char *v, const char *name,
		      const char *const *words, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v, words[i]) == 0) {
			*out = i;
			return 0;
		}
	fprintf(stderr, "kmirror-produce: %s: '%s' is not one of", name, v);
	for (int i = 0; i < n; i++)
		fprintf(stderr, " %s", words[i]);
	fprintf(stderr, "\n%s", usage_text);
	return EXIT_USAGE;
}

/* The value of an option: "--opt=V" or the next argument. */
static const char *opt_value(int argc, char **argv, int *i, size_t n)
{
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* Options with an integer value: name, bounds, where it goes. */
struct int_opt {
	const char *name;
	long long lo, hi;
	size_t off;
};

static const struct int_opt int_opts[] = {
	{ "--count", 0, INT64_MAX / 2, offsetof(struct opts, count) },
	{ "--size", 0, VALUE_BYTES_MAX, offsetof(struct opts, size) },
	{ "--txn-size", 1, INT32_MAX, offsetof(struct opts, txn_size) },
	{ "--abort-every", 1, INT32_MAX, offsetof(struct opts, abort_every) },
	{ "--headers", 0, HEADERS_MAX, offsetof(struct opts, headers) },
	{ "--linger-ms", 0, 900000, offsetof(struct opts, linger_ms) },
	{ "--batch-size", 1, 2147483647, offsetof(struct opts, batch_size) },
	{ "--timeout-ms", 1, 86400000, offsetof(struct opts, timeout_ms) },
};

static int set_int(struct opts *o, const struct int_opt *io, const char *v)
{
	long long *dst = (long long *)((char *)o + io->off);
	char lo[32], hi[32];

	if (parse_ll(v, io->lo, io->hi, dst))
		return 0;
	snprintf(lo, sizeof(lo), "%lld", io->lo);
	snprintf(hi, sizeof(hi), "%lld", io->hi);
	fprintf(stderr, "kmirror-produce: %s must be an integer in %s..%s, "
		"not '%s'\n%s", io->name, lo, hi, v, usage_text);
	return EXIT_USAGE;
}

static int set_partition(struct opts *o, const char *v)
{
	long long p;

	if (!parse_ll(v, -1, INT32_MAX, &p))
		return usage("--partition must be -1 or a partition, not '%s'",
			     v);
	o->round_robin = false;
	o->partition = (int32_t)p;
	return 0;
}

static int set_rate(struct opts *o, const char *v)
{
	char *end;

	errno = 0;
	o->rate = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || !(o->rate >= 0) ||
	    o->rate > 1e9)
		return usage("--rate must be a number of messages per second "
			     ">= 0, not '%s'", v);
	return 0;
}

static int set_seed(struct opts *o, const char *v)
{
	char *end;

	errno = 0;
	o->seed = strtoull(v, &end, 0);
	if (errno != 0 || end == v || *end != '\0' || *v == '-')
		return usage("--seed must be an unsigned integer, not '%s'", v);
	return 0;
}

/* An option of text_opts. @return 0 or EXIT_USAGE (printed). */
static int set_text(struct opts *o, const char *name, const char *v)
{
	static const char *const modes[] = { "plain", "idempotent",
					     "transactional" };
	static const char *const keys[] = { "none", "seq", "random" };
	static const char *const codecs[] = { "none", "gzip", "snappy", "lz4",
					      "zstd" };
	int w = 0, rc;

	if (strcmp(name, "--bootstrap") == 0)
		o->bootstrap = v;
	else if (strcmp(name, "--topic") == 0)
		o->topic = v;
	else if (strcmp(name, "--transactional-id") == 0)
		o->txn_id = v;
	else if (strcmp(name, "--partition") == 0)
		return set_partition(o, v);
	else if (strcmp(name, "--rate") == 0)
		return set_rate(o, v);
	else if (strcmp(name, "--seed") == 0)
		return set_seed(o, v);
	else if (strcmp(name, "--mode") == 0) {
		rc = parse_word(v, name, modes, 3, &w);
		o->mode = (enum mode)w;
		return rc;
	} else if (strcmp(name, "--keys") == 0) {
		rc = parse_word(v, name, keys, 3, &w);
		o->keys = (enum keys)w;
		return rc;
	} else if (strcmp(name, "--compression") == 0) {
		rc = parse_word(v, name, codecs, 5, &w);
		o->compression = codecs[w];
		return rc;
	}
	return *v ? 0 : usage("%s needs a non-empty value", name);
}

static const char *const text_opts[] = {
	"--bootstrap", "--topic", "--transactional-id", "--partition", "--rate",
	"--seed", "--mode", "--keys", "--compression",
};

static const struct int_opt *find_int_opt(const char *name)
{
	for (size_t k = 0; k < sizeof(int_opts) / sizeof(int_opts[0]); k++)
		if (strcmp(name, int_opts[k].name) == 0)
			return &int_opts[k];
	return NULL;
}

static bool is_text_opt(const char *name)
{
	for (size_t k = 0; k < sizeof(text_opts) / sizeof(text_opts[0]); k++)
		if (strcmp(name, text_opts[k]) == 0)
			return true;
	return false;
}

/* One "--name VALUE" or "--name=VALUE" at argv[*i]. */
static int parse_one(int argc, char **argv, int *i, struct opts *o)
{
	const char *a = argv[*i], *eq = strchr(a, '=');
	size_t n = eq ? (size_t)(eq - a) : strlen(a);
	const struct int_opt *io;
	char name[32];
	const char *v;

	if (strncmp(a, "--", 2) != 0 || n >= sizeof(name))
		return usage("unknown argument '%s'", a);
	memcpy(name, a, n);
	name[n] = '\0';
	io = find_int_opt(name);
	if (io == NULL && !is_text_opt(name))
		return usage("unknown option '%s'", name);
	v = opt_value(argc, argv, i, n);
	if (v == NULL)
		return usage("%s needs a value", name);
	if (io == NULL)
		return set_text(o, name, v);
	if (strcmp(name, "--txn-size") == 0)
		o->txn_size_given = true;
	return set_int(o, io, v);
}

static int check_opts(const struct opts *o)
{
	if (o->bootstrap == NULL)
		return usage("%s", "--bootstrap is required");
	if (o->topic == NULL)
		return usage("%s", "--topic is required");
	if (o->mode != MODE_TRANSACTIONAL && o->txn_size_given)
		return usage("%s", "--txn-size needs --mode transactional");
	if (o->mode != MODE_TRANSACTIONAL && o->abort_every > 0)
		return usage("%s", "--abort-every needs --mode transactional");
	if (o->mode != MODE_TRANSACTIONAL && o->txn_id)
		return usage("%s", "--transactional-id needs --mode "
				   "transactional");
	return 0;
}

/* @return 0, EXIT_USAGE (printed), or -1 for --help. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .compression = "none", .round_robin = true,
			    .count = 100, .size = 100, .txn_size = 100,
			    .keys = KEYS_SEQ, .linger_ms = -1,
			    .batch_size = -1, .timeout_ms = 30000 };
	for (int i = 1; i < argc; i++) {
		int rc;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return -1;
		rc = parse_one(argc, argv, &i, o);
		if (rc != 0)
			return rc;
	}
	return check_opts(o);
}

static double elapsed_s(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - since->tv_sec) +
	       (double)(now.tv_nsec - since->tv_nsec) / 1e9;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
			void *opaque)
{
	struct stats *st = opaque;

	(void)rk;
	if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
		st->delivered++;
		st->bytes += (long long)(m->len + m->key_len);
		return;
	}
	if (st->failed_reports++ == 0)
		snprintf(st->first_error, sizeof(st->first_error), "%s",
			 rd_kafka_err2str(m->err));
}

static int conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char errstr[512];

	if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) ==
	    RD_KAFKA_CONF_OK)
		return 0;
	fprintf(stderr, "kmirror-produce: %s=%s: %s\n", k, v, errstr);
	return -1;
}

/* The mode's properties. */
static int conf_mode(rd_kafka_conf_t *conf, const struct opts *o)
{
	char id[64];

	if (o->mode == MODE_PLAIN)
		return conf_set(conf, "enable.idempotence", "false") ||
		       conf_set(conf, "acks", "1");
	if (o->mode == MODE_IDEMPOTENT)
		return conf_set(conf, "enable.idempotence", "true");
	snprintf(id, sizeof(id), "kmirror-produce-%ld", (long)getpid());
	return conf_set(conf, "transactional.id", o->txn_id ? o->txn_id : id);
}

static rd_kafka_t *producer_new(const struct opts *o, struct stats *st)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char errstr[512], num[32];
	rd_kafka_t *rk = NULL;
	int bad = conf_set(conf, "bootstrap.servers", o->bootstrap) ||
		  conf_set(conf, "compression.codec", o->compression) ||
		  conf_set(conf, "log_level", "3") || conf_mode(conf, o);

	snprintf(num, sizeof(num), "%lld", o->timeout_ms);
	bad = bad || conf_set(conf, "message.timeout.ms", num) ||
	      conf_set(conf, "transaction.timeout.ms", num);
	snprintf(num, sizeof(num), "%lld", o->linger_ms);
	bad = bad || (o->linger_ms >= 0 && conf_set(conf, "linger.ms", num));
	snprintf(num, sizeof(num), "%lld", o->batch_size);
	bad = bad || (o->batch_size > 0 && conf_set(conf, "batch.size", num));
	if (!bad) {
		rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
		rd_kafka_conf_set_opaque(conf, st);
		rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
				  sizeof(errstr));
		if (rk == NULL)
			fprintf(stderr, "kmirror-produce: rd_kafka_new: %s\n",
				errstr);
	}
	if (rk == NULL)
		rd_kafka_conf_destroy(conf);
	return rk;
}

/* The partition count of the topic, from Metadata. */
static int32_t topic_partitions(rd_kafka_t *rk, const struct opts *o)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t err;
	int32_t n = -1;

	err = rd_kafka_metadata(rk, 0, rkt, &md, (int)o->timeout_ms);
	if (err)
		fprintf(stderr, "kmirror-produce: metadata for %s: %s\n",
			o->topic, rd_kafka_err2str(err));
	else if (md->topic_cnt != 1 || md->topics[0].err)
		fprintf(stderr, "kmirror-produce: topic %s: %s\n", o->topic,
			rd_kafka_err2str(md->topic_cnt ? md->topics[0].err
						       : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
	else if (md->topics[0].partition_cnt == 0)
		fprintf(stderr, "kmirror-produce: topic %s has no partitions\n",
			o->topic);
	else
		n = md->topics[0].partition_cnt;
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	return n;
}

static rd_kafka_headers_t *headers_new(const struct opts *o, int32_t part,
				       long long seq)
{
	char name[KM_PAYLOAD_TEXT_BYTES_MAX], value[KM_PAYLOAD_TEXT_BYTES_MAX];
	rd_kafka_headers_t *h;

	if (o->headers == 0)
		return NULL;
	h = rd_kafka_headers_new((size_t)o->headers);
	for (int i = 0; i < (int)o->headers; i++) {
		int n = km_payload_header(o->seed, part, seq, i, name, value);

		rd_kafka_header_add(h, name, -1, value, n);
	}
	return h;
}

/* Enqueue one message, waiting (serving delivery reports) while the local
 * queue is full, up to the timeout. */
static int send_one(struct run *r, int32_t part, int32_t payload_part,
		    long long seq)
{
	const struct opts *o = r->o;
	char key[KM_PAYLOAD_TEXT_BYTES_MAX];
	const char *kp = NULL; /* the macros take plain expressions only */
	int key_len = 0;
	struct timespec t0;
	rd_kafka_resp_err_t err;

	if (o->keys == KEYS_SEQ)
		key_len = km_payload_key_seq(seq, key);
	else if (o->keys == KEYS_RANDOM)
		key_len = km_payload_key_random(o->seed, payload_part, seq, key);
	if (key_len > 0)
		kp = key;
	km_payload_value(o->seed, payload_part, seq, r->value, (size_t)o->size);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) { /* bounded by the timeout below */
		rd_kafka_headers_t *h = headers_new(o, payload_part, seq);

		err = rd_kafka_producev(
			r->rk, RD_KAFKA_V_TOPIC(o->topic),
			RD_KAFKA_V_PARTITION(part),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_KEY(kp, (size_t)key_len),
			RD_KAFKA_V_VALUE(r->value, (size_t)o->size),
			RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
		if (err && h)
			rd_kafka_headers_destroy(h);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL ||
		    elapsed_s(&t0) * 1000 > (double)o->timeout_ms)
			break;
		rd_kafka_poll(r->rk, 10);
	}
	if (err)
		fprintf(stderr, "kmirror-produce: produce: %s\n",
			rd_kafka_err2str(err));
	return err ? -1 : 0;
}

/* Sleep until message i's turn at --rate: pacing is the feature here. */
static void pace(const struct run *r, long long i)
{
	double due, now;
	struct timespec ts;

	if (r->o->rate <= 0)
		return;
	due = (double)i / r->o->rate;
	now = elapsed_s(&r->start);
	if (due <= now)
		return;
	ts.tv_sec = (time_t)(due - now);
	ts.tv_nsec = (long)((due - now - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int take_error(rd_kafka_error_t *error, const char *what)
{
	if (error == NULL)
		return 0;
	fprintf(stderr, "kmirror-produce: %s: %s\n", what,
		rd_kafka_error_string(error));
	rd_kafka_error_destroy(error);
	return -1;
}

/* Close transaction number `txn` (from 1): commit, or flush and abort, so an
 * aborted transaction's batches are in the log as a real producer's are. */
static int end_txn(struct run *r, long long txn)
{
	int timeout = (int)r->o->timeout_ms;
	rd_kafka_resp_err_t err;

	if (r->o->abort_every == 0 || txn % r->o->abort_every != 0) {
		r->st.committed++;
		return take_error(rd_kafka_commit_transaction(r->rk, timeout),
				  "commit_transaction");
	}
	err = rd_kafka_flush(r->rk, timeout);
	if (err) {
		fprintf(stderr, "kmirror-produce: flush: %s\n",
			rd_kafka_err2str(err));
		return -1;
	}
	r->st.aborted++;
	return take_error(rd_kafka_abort_transaction(r->rk, timeout),
			  "abort_transaction");
}

/* Message i: its partition, the partition its payload names, its sequence. */
static void place(struct run *r, long long i, int32_t *part,
		  int32_t *payload_part, long long *seq)
{
	if (r->o->round_robin) {
		*part = *payload_part = (int32_t)(i % r->partitions);
		*seq = r->seq[*part]++;
		return;
	}
	*part = r->o->partition < 0 ? RD_KAFKA_PARTITION_UA : r->o->partition;
	*payload_part = r->o->partition;
	*seq = r->seq[0]++;
}

static int send_all(struct run *r)
{
	const struct opts *o = r->o;
	bool txn = o->mode == MODE_TRANSACTIONAL;
	long long i;
	int rc = 0;

	for (i = 0; i < o->count && rc == 0; i++) {
		int32_t part, payload_part;
		long long seq;

		if (txn && i % o->txn_size == 0)
			rc = take_error(rd_kafka_begin_transaction(r->rk),
					"begin_transaction");
		pace(r, i);
		place(r, i, &part, &payload_part, &seq);
		if (rc == 0)
			rc = send_one(r, part, payload_part, seq);
		rd_kafka_poll(r->rk, 0);
		if (rc == 0 && txn && (i + 1) % o->txn_size == 0)
			rc = end_txn(r, (i + 1) / o->txn_size);
	}
	if (rc == 0 && txn && i % o->txn_size != 0)
		rc = end_txn(r, i / o->txn_size + 1);
	return rc;
}

static int prepare(struct run *r)
{
	const struct opts *o = r->o;

	r->partitions = o->round_robin ? topic_partitions(r->rk, o) : 1;
	if (r->partitions < 0)
		return -1;
	r->seq = calloc((size_t)r->partitions, sizeof(*r->seq));
	r->value = malloc(o->size ? (size_t)o->size : 1);
	if (r->seq == NULL || r->value == NULL) {
		fprintf(stderr, "kmirror-produce: out of memory\n");
		return -1;
	}
	if (o->mode == MODE_TRANSACTIONAL)
		return take_error(rd_kafka_init_transactions(
					  r->rk, (int)o->timeout_ms),
				  "init_transactions");
	return 0;
}

/* Print the summary; @return the exit status. */
static int finish(struct run *r, int rc)
{
	const struct opts *o = r->o;
	/* A message's report comes within message.timeout.ms plus librdkafka's
	 * once-a-second timeout scan: wait that long for the last ones. */
	rd_kafka_resp_err_t err =
		rd_kafka_flush(r->rk, (int)o->timeout_ms + FLUSH_SLACK_MS);
	long long failed;

	if (err)
		fprintf(stderr, "kmirror-produce: flush: %s\n",
			rd_kafka_err2str(err));
	failed = o->count - r->st.delivered;
	if (r->st.failed_reports)
		fprintf(stderr, "kmirror-produce: %lld delivery failures, the "
			"first: %s\n", r->st.failed_reports, r->st.first_error);
	if (o->mode == MODE_TRANSACTIONAL)
		fprintf(stderr, "transactions committed=%lld aborted=%lld\n",
			r->st.committed, r->st.aborted);
	printf("produced=%lld failed=%lld bytes=%lld seconds=%.3f\n",
	       r->st.delivered, failed, r->st.bytes, elapsed_s(&r->start));
	fflush(stdout);
	return rc == 0 && !err && failed == 0 ? 0 : EXIT_FAILED;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct run r = { .o = &o };
	int rc = parse_args(argc, argv, &o);

	if (rc < 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (rc != 0)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &r.start);
	r.rk = producer_new(&o, &r.st);
	if (r.rk == NULL)
		return EXIT_FAILED;
	rc = prepare(&r);
	if (rc == 0)
		rc = send_all(&r);
	rc = finish(&r, rc);
	rd_kafka_destroy(r.rk);
	free(r.seq);
	free(r.value);
	return rc;
}
