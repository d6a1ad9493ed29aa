/* bench kafka-tls: what TLS and SASL to the source cost kmirrord (issue
 * 16), on the same real Apache Kafka topic, side by side in one run:
 *   PLAINTEXT   kmirrord fetching over the broker's plaintext listener;
 *   SSL         the same broker's SSL listener (TLS 1.3, user-space TLS:
 *               OpenSSL over memory BIOs, then io_uring);
 *   SASL_SSL    its SASL_SSL listener, SCRAM-SHA-256 login, then as SSL.
 * kTLS (the kernel decrypting, io_uring receiving plaintext) would be a
 * fourth column; kmirrord has no kTLS data path, so the bench prints the
 * kTLS probe's answer (dataplane/net/ktls.h) instead of a figure, and
 * checks that kmirrord's status says the same.
 *
 * Method. One KRaft broker (tests/kafka's harness) with PLAINTEXT, SSL
 * and SASL_SSL listeners; a CA and the broker's certificate made with
 * `openssl`, the SCRAM user made at format time (kafka-storage
 * --add-scram). For each record size a one-partition topic is filled once
 * with kafka-producer-perf-test (uncompressed, 512 KiB batches); its end
 * offset comes from the broker (ListOffsets) and its size from the
 * broker's segment files: the bytes every run moves. Then, per protocol,
 * a fresh kmirrord (kernel networking, data on tmpfs so that the disk
 * does not blur a CPU comparison) mirrors it from the start: done = its
 * status says hw = END; "first" = the first status with leo > 0. CPU is
 * kmirrord's own utime+stime (/proc/PID/stat); the broker's CPU over the
 * same span is printed beside it (it encrypts what kmirrord decrypts).
 * The broker's Java TLS is slower than kmirrord's, so over TLS the stream
 * lasts longer and kmirrord's fixed cost per second (its loops, long
 * polls) weighs in its CPU: after each run kmirrord is left caught up for
 * 5 s to measure that rate (idle/s), and "net s/GB" is the stream's CPU
 * less that rate times the stream's time.
 * Rounds ($KM_BENCH_TLS_ROUNDS, default 1) repeat the three in turn; the
 * table has every run and the ratios use each protocol's median. No sleep
 * stands for a condition: every wait polls one with a deadline.
 *
 * usage: bench-kafka-tls [MIB]   MiB per workload (default 1024, or
 *   $KM_BENCH_TLS_MIB); $KM_BENCH_TLS_SIZES = record sizes (default
 *   "65536,1024"). Needs Kafka's jars in $KM_KAFKA_LIBS and openssl(1). */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <jansson.h>

#include "dataplane/net/ktls.h"
#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"
#include "bench/proc_cpu.h"

using namespace kmtest;

namespace {

const int kWaitMs = 900000;  /* per run: a deadline */
const int kFirstMs = 180000; /* until a run's first record */
const char *kUser = "bench", *kPass = "bench-secret";
const useconds_t kIdleWindowUs = 5000000;

double now_s()
{
	return (double)now_ms() / 1000.0;
}


/* The size of a partition: its .log files. */
int64_t log_bytes(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	struct stat st;
	int64_t sum = 0;

	while (d && (e = readdir(d)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0 &&
		    stat((dir + "/" + n).c_str(), &st) == 0)
			sum += st.st_size;
	}
	if (d)
		closedir(d);
	return sum;
}

int64_t env_int(const char *name, int64_t def)
{
	const char *v = getenv(name);

	return v && *v ? atoll(v) : def;
}

std::string loadavg()
{
	std::string s = read_file("/proc/loadavg");

	return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	f.close();
	return f.good() && chmod(path.c_str(), mode) == 0;
}

std::string openssl(const std::vector<std::string> &args)
{
	std::vector<std::string> argv = { "openssl" };
	argv.insert(argv.end(), args.begin(), args.end());
	ChildResult r = run_command(argv, 60000);
	return r.exit_code == 0 ? "" : "openssl " + args[0] + ": " + r.describe();
}

/* ca.pem/ca.key, and broker.ks.pem (key + certificate for 127.0.0.1 and
 * localhost, Kafka's PEM keystore). */
std::string make_certs(const std::string &d)
{
	std::string why, b = d + "/broker";

	if (!(why = openssl({ "req", "-x509", "-newkey", "rsa:2048", "-nodes",
			      "-keyout", d + "/ca.key", "-out", d + "/ca.pem",
			      "-subj", "/CN=bench-ca", "-days", "2" })).empty())
		return why;
	if (!put(b + ".ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n", 0644))
		return "cannot write " + b + ".ext";
	if (!(why = openssl({ "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
			      b + ".key", "-out", b + ".csr", "-subj",
			      "/CN=broker" })).empty() ||
	    !(why = openssl({ "x509", "-req", "-in", b + ".csr", "-CA",
			      d + "/ca.pem", "-CAkey", d + "/ca.key",
			      "-CAcreateserial", "-out", b + ".pem", "-days", "2",
			      "-extfile", b + ".ext" })).empty())
		return why;
	return put(b + ".ks.pem", read_file(b + ".key") + read_file(b + ".pem"),
		   0600) ? "" : "cannot write " + b + ".ks.pem";
}

std::vector<std::string> broker_props(const std::string &keystore)
{
	std::vector<std::string> v;
	for (const char *l : { "ssl", "sasl_ssl" }) {
		std::string p = std::string("listener.name.") + l + ".";
		v.push_back(p + "ssl.keystore.type=PEM");
		v.push_back(p + "ssl.keystore.location=" + keystore);
	}
	v.push_back("listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256");
	v.push_back("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
		    "org.apache.kafka.common.security.scram.ScramLoginModule required;");
	return v;
}

struct Workload {
	std::string topic;
	int size = 0;
	int64_t records = 0, end = 0, bytes = 0;
};

struct Run {
	std::string proto;
	double wall_s = 0, stream_s = 0, cpu_s = 0, stream_cpu_s = 0;
	double src_cpu_s = 0;
	double idle_cpu_per_s = 0; /* caught up, after the run */
};

std::string fill(KafkaBroker &b, Workload *w)
{
	std::string why = b.create_topic(w->topic, 1);
	int64_t lo = -1;

	if (!why.empty())
		return why;
	printf("filling %s: %lld records of %d B (kafka-producer-perf-test)\n",
	       w->topic.c_str(), (long long)w->records, w->size);
	why = b.producer_perf(w->topic, w->records, w->size,
			      { "acks=1", "batch.size=524288", "linger.ms=20",
				"compression.type=none" });
	if (why.empty())
		why = watermarks(b.bootstrap(), w->topic, 0, &lo, &w->end);
	if (!why.empty())
		return why;
	w->bytes = log_bytes(b.partition_dir(w->topic, 0));
	if (w->end != w->records)
		return "the broker's end offset of " + w->topic + " is " +
		       std::to_string(w->end) + ", not " +
		       std::to_string(w->records);
	printf("source %s: end offset %lld, %lld bytes of log\n",
	       w->topic.c_str(), (long long)w->end, (long long)w->bytes);
	return "";
}

/* status --json's source_tls ("" if none). */
std::string status_tls(const Daemon &d)
{
	const char *exe = getenv("KM_KMIRRORCTL");
	ChildResult r = run_command({ exe ? exe : "kmirrorctl", "--socket",
				      d.socket(), "status", "--json" }, 60000);
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	const char *v = json_string_value(json_object_get(root, "source_tls"));
	std::string s = v ? v : "";

	json_decref(root);
	return s;
}

struct Setup {
	std::string certs;
	uint16_t ssl = 0, sasl_ssl = 0;
	std::string pw_file, tls_line; /* what status must say over TLS */
};

std::vector<std::string> sets_for(const Setup &s, const std::string &proto,
				  const KafkaBroker &b)
{
	std::string at = "127.0.0.1:";
	if (proto == "PLAINTEXT")
		return { "source.bootstrap.servers=" + b.bootstrap() };
	std::vector<std::string> v = {
		"source.security.protocol=" + proto,
		"source.ssl.ca.location=" + s.certs + "/ca.pem",
		"source.bootstrap.servers=" + at +
			std::to_string(proto == "SSL" ? s.ssl : s.sasl_ssl) };
	if (proto == "SASL_SSL") {
		v.push_back("source.sasl.mechanism=SCRAM-SHA-256");
		v.push_back(std::string("source.sasl.username=") + kUser);
		v.push_back("source.sasl.password.file=" + s.pw_file);
	}
	return v;
}

/* A directory on tmpfs, removed with the run. */
struct ShmDir {
	std::string path;
	ShmDir()
	{
		char t[] = "/dev/shm/km-bench-tls-XXXXXX";
		if (mkdtemp(t) != nullptr)
			path = t;
	}
	~ShmDir()
	{
		std::string rm = "rm -rf '" + path + "'";
		if (!path.empty() && system(rm.c_str()) != 0)
			fprintf(stderr, "bench kafka-tls: could not remove %s\n",
				path.c_str());
	}
};

std::string run_kmirrord(const Setup &s, const KafkaBroker &b,
			 const Workload &w, const std::string &proto, Run *r)
{
	ShmDir dir;
	std::vector<std::string> sets = sets_for(s, proto, b);
	sets.push_back("topics=" + w.topic);
	if (dir.path.empty())
		return "cannot make a directory in /dev/shm";
	Daemon d(dir.path + "/data", sets);
	double t0 = now_s(), s0 = proc_cpu_s(b.pid(), true), tf = 0, cf = 0;
	std::string why, part = w.topic + ":0";

	r->proto = proto;
	if (!(why = d.start()).empty())
		return why;
	pid_t pid = d.child().pid();
	why = d.wait_status([&](auto &st) { return st.count(part) && st.at(part).leo > 0; },
			    kFirstMs);
	tf = now_s();
	cf = proc_cpu_s(pid, true);
	if (why.empty())
		why = d.wait_status([&](auto &st) { return st.count(part) && st.at(part).hw == w.end; },
				    kWaitMs);
	double t1 = now_s();
	r->cpu_s = proc_cpu_s(pid, true);
	r->src_cpu_s = proc_cpu_s(b.pid(), true) - s0;
	r->wall_s = t1 - t0;
	r->stream_s = t1 - tf;
	r->stream_cpu_s = r->cpu_s - cf;
	/* A measurement window, not a wait: what kmirrord burns per second
	 * caught up (its loops, the fetch sessions' long polls). */
	if (why.empty()) {
		usleep(kIdleWindowUs);
		r->idle_cpu_per_s = (proc_cpu_s(pid, true) - r->cpu_s) /
				    (now_s() - t1);
	}
	std::string tls = status_tls(d);
	if (why.empty() && tls != (proto == "PLAINTEXT" ? "" : s.tls_line))
		why = "kmirrord's status says source_tls '" + tls + "', not '" +
		      s.tls_line + "'";
	else if (!tls.empty())
		printf("  %s: kmirrorctl status: source_tls: %s\n", proto.c_str(),
		       tls.c_str());
	ChildResult res;
	d.stop(30000, &res);
	return why;
}

/* The stream's CPU less what the same span would cost caught up: the
 * bytes' own cost, when a slow sender stretches the stream. */
double net_cpu(const Run &r)
{
	return r.stream_cpu_s - r.idle_cpu_per_s * r.stream_s;
}

void print_run(const Workload &w, const Run &r)
{
	double gb = (double)w.bytes / 1e9, mb = (double)w.bytes / 1e6;

	printf("  %-10s %8.2f %8.1f %8.2f %8.2f | %8.2f %8.1f %8.2f %8.2f | "
	       "%7.3f %8.2f | %7.2f\n",
	       r.proto.c_str(), r.wall_s, mb / r.wall_s, r.cpu_s, r.cpu_s / gb,
	       r.stream_s, mb / r.stream_s, r.stream_cpu_s,
	       r.stream_cpu_s / gb, r.idle_cpu_per_s, net_cpu(r) / gb,
	       r.src_cpu_s);
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

/* Each protocol's median against PLAINTEXT's: above 1 costs more. */
void print_ratios(const std::vector<Run> &runs)
{
	std::map<std::string, std::vector<double>> cpu, scpu, wall, swall, ncpu;

	for (auto &r : runs) {
		ncpu[r.proto].push_back(net_cpu(r));
		cpu[r.proto].push_back(r.cpu_s);
		scpu[r.proto].push_back(r.stream_cpu_s);
		wall[r.proto].push_back(r.wall_s);
		swall[r.proto].push_back(r.stream_s);
	}
	for (const char *p : { "SSL", "SASL_SSL" })
		printf("  %s vs PLAINTEXT: CPU per GB x%.2f net of idle, x%.2f "
		       "stream, x%.2f total; throughput x%.2f stream, x%.2f "
		       "total\n", p, median(ncpu[p]) / median(ncpu["PLAINTEXT"]),
		       median(scpu[p]) / median(scpu["PLAINTEXT"]),
		       median(cpu[p]) / median(cpu["PLAINTEXT"]),
		       median(swall["PLAINTEXT"]) / median(swall[p]),
		       median(wall["PLAINTEXT"]) / median(wall[p]));
}

std::string bench_workload(KafkaBroker &b, const Setup &s, Workload &w,
			   int rounds)
{
	std::vector<Run> runs;
	std::string why = fill(b, &w);

	for (int k = 0; why.empty() && k < rounds; k++)
		for (const char *p : { "PLAINTEXT", "SSL", "SASL_SSL" }) {
			Run r;
			if (!(why = run_kmirrord(s, b, w, p, &r)).empty())
				break;
			runs.push_back(r);
		}
	if (!why.empty())
		return why;
	printf("\n%s: %lld records of %d B, %lld bytes of log (%.1f MB); "
	       "load average now %s\n",
	       w.topic.c_str(), (long long)w.end, w.size, (long long)w.bytes,
	       (double)w.bytes / 1e6, loadavg().c_str());
	printf("  %-10s %8s %8s %8s %8s | %8s %8s %8s %8s | %7s %8s | %7s\n",
	       "kmirrord", "total s", "MB/s", "CPU s", "CPU s/GB", "stream s",
	       "MB/s", "CPU s", "CPU s/GB", "idle/s", "net s/GB", "broker");
	for (auto &r : runs)
		print_run(w, r);
	print_ratios(runs);
	printf("  kTLS: %s: no kTLS figure\n\n", s.tls_line.c_str());
	return "";
}

} // namespace

int main(int argc, char **argv)
{
	std::string libs, why = kafka_libs(&libs);
	int64_t mib = argc > 1 ? atoll(argv[1]) : env_int("KM_BENCH_TLS_MIB", 1024);
	int rounds = (int)env_int("KM_BENCH_TLS_ROUNDS", 1);
	const char *sizes = getenv("KM_BENCH_TLS_SIZES");
	TempDir certs("km-bench-tls-certs");
	Setup s;
	km_ktls_answer kt;
	char user[128];

	if (!why.empty()) {
		fprintf(stderr, "bench kafka-tls: no Apache Kafka jars: %s\n", why.c_str());
		return 1;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	s.certs = certs.path();
	s.pw_file = certs.file("pw");
	if (!(why = make_certs(s.certs)).empty() ||
	    !put(s.pw_file, std::string(kPass) + "\n", 0600)) {
		fprintf(stderr, "bench kafka-tls: certificates: %s\n", why.c_str());
		return 1;
	}
	km_ktls_user_tls(user, sizeof(user));
	km_ktls_probe(&kt);
	s.tls_line = std::string(user) + "; " + kt.why;
	KafkaBroker b(broker_props(certs.file("broker.ks.pem")));
	s.ssl = b.add_listener("SSL", "SSL");
	s.sasl_ssl = b.add_listener("SASL_SSL", "SASL_SSL");
	b.add_format_args({ "--add-scram", std::string("SCRAM-SHA-256=[name=") +
				kUser + ",password=" + kPass + "]" });
	if (!(why = b.start()).empty()) {
		fprintf(stderr, "bench kafka-tls: the broker did not start: %s\n%s\n",
			why.c_str(), b.log_tail().c_str());
		return 1;
	}
	printf("bench kafka-tls: kmirrord from one Kafka broker over PLAINTEXT "
	       "(%s), SSL (:%u) and SASL_SSL SCRAM-SHA-256 (:%u); %lld MiB per "
	       "workload, %d round(s); %ld online cores, load average %s\n"
	       "TLS: %s\n", b.bootstrap().c_str(), (unsigned)s.ssl,
	       (unsigned)s.sasl_ssl, (long long)mib, rounds,
	       sysconf(_SC_NPROCESSORS_ONLN), loadavg().c_str(), s.tls_line.c_str());
	std::istringstream list(sizes && *sizes ? sizes : "65536,1024");
	for (std::string z; std::getline(list, z, ',');) {
		Workload w;
		w.size = atoi(z.c_str());
		w.topic = "tls" + std::to_string(w.size);
		w.records = w.size > 0 ? (mib << 20) / w.size : 0;
		if (w.records <= 0 || !(why = bench_workload(b, s, w, rounds)).empty()) {
			fprintf(stderr, "bench kafka-tls: %s: %s\n", w.topic.c_str(),
				w.records <= 0 ? "bad record size" : why.c_str());
			return 1;
		}
	}
	return 0;
}
