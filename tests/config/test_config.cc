// Goal: every kmirrord key is parsed and validated as documented (good and
// bad values, with the exact messages), --set overrides the file, the last
// duplicate wins, required keys and the checks between keys hold, and the
// loaded struct feeds km_log_config, the EAL argv and a text that reads
// back to the same struct.
// Method: load files written to a temp dir and --set lists; errors from
// --set have no path in them, so their full text is compared.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "config_util.h"
#include "control/config.h"
#include "control/namefilter.h"
#include "iouring_log/log.h"

namespace {

using cfgtest::load;
using cfgtest::Loaded;
using cfgtest::TempDir;

uint32_t ip(const char *s)
{
	in_addr a{};
	EXPECT_EQ(1, inet_pton(AF_INET, s, &a)) << s;
	return a.s_addr;
}

std::string hostname()
{
	char h[256] = {};
	gethostname(h, sizeof(h) - 1);
	return h;
}

TEST(Config, Defaults)
{
	Loaded l = load(nullptr, { "data.dir=/var/lib/kmirror" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ("", l.err);
	EXPECT_STREQ("/var/lib/kmirror", l->data_dir);
	EXPECT_EQ(0u, l->bootstrap_count);
	EXPECT_EQ(0u, l->topics_count);
	EXPECT_STREQ("", l->listener.host);
	EXPECT_EQ(9092, l->listener.port);
	EXPECT_FALSE(l->advertised_set);
	EXPECT_EQ(hostname(), l->advertised.host);
	EXPECT_EQ(9092, l->advertised.port);
	EXPECT_STREQ("/var/lib/kmirror/kmirrord.sock", l->control_socket);
	EXPECT_STREQ("", l->cluster_id);
	EXPECT_FALSE(l->cluster_id_configured);
	EXPECT_EQ(1, l->node_id);
	EXPECT_EQ(km_config_default_workers(), l->workers);
	EXPECT_EQ(KM_CONFIG_NET_KERNEL, l->net_mode);
	EXPECT_STREQ("", l->dpdk.eal_args);
	EXPECT_STREQ("", l->dpdk.port);
	EXPECT_EQ(0u, l->dpdk.ip_be);
	EXPECT_EQ(ip("255.255.255.0"), l->dpdk.netmask_be);
	EXPECT_EQ(0u, l->dpdk.gateway_be);
	EXPECT_FALSE(l->dpdk.mac_set);
	EXPECT_EQ(1ull << 30, l->segment_bytes);
	EXPECT_EQ(1000u, l->flush_interval_ms);
	EXPECT_EQ(64ull << 20, l->flush_bytes);
	EXPECT_FALSE(l->flush_always);
	EXPECT_EQ(KM_CONFIG_STOP_TRUNCATE, l->stop_mode);
	EXPECT_EQ(KM_LOG_INFO, l->log_level);
	EXPECT_EQ(KM_CONFIG_RESET_NONE, l->offset_reset);
	EXPECT_EQ(52428800u, l->fetch_bytes_max);
	EXPECT_EQ(500u, l->fetch_wait_ms_max);
	EXPECT_EQ((uint32_t)KM_BATCH_BYTES_MAX, l->batch_bytes_max);
}

const char *const kFullFile =
	"# kmirrord, every key\n"
	"data.dir = /data/kmirror\n"
	"source.bootstrap.servers = src1:9092, 10.1.2.3:9093 ,PLAINTEXT://src3.example.com:9094\n"
	"topics = orders,payments, a.b_c-D\n"
	"listeners = PLAINTEXT://0.0.0.0:19092\n"
	"advertised.listeners = PLAINTEXT://mirror1.example.com:19092\n"
	"control.socket = /run/kmirror/ctl.sock\n"
	"cluster.id = q1Sh-9_ISia_zwGINzRvyQ\n"
	"node.id = 7\n"
	"workers = 1\n" /* net.mode=dpdk runs one worker (tests/dpdk) */
	"net.mode = dpdk\n"
	"dpdk.eal.args = -l 0-3 --in-memory --vdev=net_af_packet0,iface=veth0\n"
	"dpdk.port = net_af_packet0,iface=veth0\n"
	"dpdk.ip = 10.0.0.2\n"
	"dpdk.netmask = 16\n"
	"dpdk.gateway = 10.0.255.254\n"
	"dpdk.mac = 02:00:00:AB:cd:01\n"
	"segment.bytes = 512M\n"
	"flush = always\n"
	"flush.ms = 5s\n"
	"flush.bytes = 8MiB\n"
	"stop.mode = abort\n"
	"mirror.offset.reset = earliest\n"
	"fetch.max.bytes = 16777216\n"
	"fetch.max.wait.ms = 250\n"
	"batch.max.bytes = 8M\n"
	"log.level = debug\n";

TEST(Config, EveryKeyFromFile)
{
	TempDir d;
	std::string path = d.file("kmirrord.properties", kFullFile);
	Loaded l = load(path.c_str());
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("/data/kmirror", l->data_dir);
	ASSERT_EQ(3u, l->bootstrap_count);
	EXPECT_STREQ("src1", l->bootstrap[0].host);
	EXPECT_EQ(9092, l->bootstrap[0].port);
	EXPECT_STREQ("10.1.2.3", l->bootstrap[1].host);
	EXPECT_EQ(9093, l->bootstrap[1].port);
	EXPECT_STREQ("src3.example.com", l->bootstrap[2].host);
	EXPECT_EQ(9094, l->bootstrap[2].port);
	ASSERT_EQ(3u, l->topics_count);
	EXPECT_STREQ("orders", l->topics[0]);
	EXPECT_STREQ("payments", l->topics[1]);
	EXPECT_STREQ("a.b_c-D", l->topics[2]);
	EXPECT_STREQ("0.0.0.0", l->listener.host);
	EXPECT_EQ(19092, l->listener.port);
	EXPECT_TRUE(l->advertised_set);
	EXPECT_STREQ("mirror1.example.com", l->advertised.host);
	EXPECT_EQ(19092, l->advertised.port);
	EXPECT_STREQ("/run/kmirror/ctl.sock", l->control_socket);
	EXPECT_STREQ("q1Sh-9_ISia_zwGINzRvyQ", l->cluster_id);
	EXPECT_TRUE(l->cluster_id_configured);
	EXPECT_EQ(7, l->node_id);
	EXPECT_EQ(1u, l->workers);
	EXPECT_EQ(KM_CONFIG_NET_DPDK, l->net_mode);
	EXPECT_STREQ("-l 0-3 --in-memory --vdev=net_af_packet0,iface=veth0",
		     l->dpdk.eal_args);
	EXPECT_STREQ("net_af_packet0,iface=veth0", l->dpdk.port);
	EXPECT_EQ(ip("10.0.0.2"), l->dpdk.ip_be);
	EXPECT_EQ(ip("255.255.0.0"), l->dpdk.netmask_be);
	EXPECT_EQ(ip("10.0.255.254"), l->dpdk.gateway_be);
	EXPECT_TRUE(l->dpdk.mac_set);
	const uint8_t mac[6] = { 0x02, 0, 0, 0xab, 0xcd, 0x01 };
	EXPECT_EQ(0, memcmp(mac, l->dpdk.mac, 6));
	EXPECT_EQ(512ull << 20, l->segment_bytes);
	EXPECT_TRUE(l->flush_always);
	EXPECT_EQ(5000u, l->flush_interval_ms);
	EXPECT_EQ(8ull << 20, l->flush_bytes);
	EXPECT_EQ(KM_CONFIG_STOP_ABORT, l->stop_mode);
	EXPECT_EQ(KM_CONFIG_RESET_EARLIEST, l->offset_reset);
	EXPECT_EQ(16777216u, l->fetch_bytes_max);
	EXPECT_EQ(250u, l->fetch_wait_ms_max);
	EXPECT_EQ(8u << 20, l->batch_bytes_max);
	EXPECT_EQ(KM_LOG_DEBUG, l->log_level);
}

// ---- good values, one key at a time ----

struct Good {
	const char *set;
	std::function<void(const km_config &)> check;
};

TEST(Config, GoodValues)
{
	const Good cases[] = {
		{ "segment.bytes=1024", [](const km_config &c) { EXPECT_EQ(1024u, c.segment_bytes); } },
		{ "segment.bytes=2147483647", [](const km_config &c) { EXPECT_EQ(2147483647u, c.segment_bytes); } },
		{ "segment.bytes=64M", [](const km_config &c) { EXPECT_EQ(64ull << 20, c.segment_bytes); } },
		{ "segment.bytes=64 MiB", [](const km_config &c) { EXPECT_EQ(64ull << 20, c.segment_bytes); } },
		{ "segment.bytes=1g", [](const km_config &c) { EXPECT_EQ(1ull << 30, c.segment_bytes); } },
		{ "segment.bytes=+4k", [](const km_config &c) { EXPECT_EQ(4096u, c.segment_bytes); } },
		{ "segment.bytes=4KiB", [](const km_config &c) { EXPECT_EQ(4096u, c.segment_bytes); } },
		{ "flush.ms=0", [](const km_config &c) { EXPECT_EQ(0u, c.flush_interval_ms); } },
		{ "flush.ms=10s", [](const km_config &c) { EXPECT_EQ(10000u, c.flush_interval_ms); } },
		{ "flush.ms=2min", [](const km_config &c) { EXPECT_EQ(120000u, c.flush_interval_ms); } },
		{ "flush.ms=1h", [](const km_config &c) { EXPECT_EQ(3600000u, c.flush_interval_ms); } },
		{ "flush.ms=25ms", [](const km_config &c) { EXPECT_EQ(25u, c.flush_interval_ms); } },
		{ "flush=interval", [](const km_config &c) { EXPECT_FALSE(c.flush_always); } },
		{ "flush=ALWAYS", [](const km_config &c) { EXPECT_TRUE(c.flush_always); } },
		{ "flush.bytes=1", [](const km_config &c) { EXPECT_EQ(1u, c.flush_bytes); } },
		{ "log.direct.io=false", [](const km_config &c) {
			EXPECT_EQ(0, c.log_direct_io);
			km_log_config lc;
			km_config_log_config(&c, "t", 0, &lc);
			EXPECT_FALSE(lc.direct_io);
		} },
		{ "log.tail.cache.bytes=8M", [](const km_config &c) {
			km_log_config lc;
			km_config_log_config(&c, "t", 0, &lc);
			EXPECT_EQ(8u << 20, lc.tail_cache_bytes);
		} },
		{ "flush.bytes=4G", [](const km_config &c) { EXPECT_EQ(4ull << 30, c.flush_bytes); } },
		{ "fetch.max.wait.ms=250ms", [](const km_config &c) { EXPECT_EQ(250u, c.fetch_wait_ms_max); } },
		{ "fetch.max.bytes=1M", [](const km_config &c) { EXPECT_EQ(1u << 20, c.fetch_bytes_max); } },
		{ "batch.max.bytes=61", [](const km_config &c) { EXPECT_EQ(61u, c.batch_bytes_max); } },
		{ "batch.max.bytes=1048588", [](const km_config &c) { EXPECT_EQ(1048588u, c.batch_bytes_max); } },
		{ "dpdk.mtu=9000", [](const km_config &c) { EXPECT_EQ(9000u, c.dpdk.mtu); } },
		// Past the 1,024 partitions a local topic took before issue 17,
		// to partitions.max's own bound (Kafka caps neither).
		{ "local.topics=big:10000,huge:1048576", [](const km_config &c) {
			ASSERT_EQ(2u, c.local_topics_count);
			EXPECT_EQ(10000u, c.local_partitions[0]);
			EXPECT_EQ(1048576u, c.local_partitions[1]);
		} },
		{ "workers=64", [](const km_config &c) { EXPECT_EQ(64u, c.workers); } },
		{ "node.id=0", [](const km_config &c) { EXPECT_EQ(0, c.node_id); } },
		{ "node.id=2147483647", [](const km_config &c) { EXPECT_EQ(INT32_MAX, c.node_id); } },
		{ "log.level=ERROR", [](const km_config &c) { EXPECT_EQ(KM_LOG_ERROR, c.log_level); } },
		{ "log.level=warn", [](const km_config &c) { EXPECT_EQ(KM_LOG_WARN, c.log_level); } },
		{ "log.level=Info", [](const km_config &c) { EXPECT_EQ(KM_LOG_INFO, c.log_level); } },
		{ "stop.mode=truncate", [](const km_config &c) { EXPECT_EQ(KM_CONFIG_STOP_TRUNCATE, c.stop_mode); } },
		{ "mirror.offset.reset=none", [](const km_config &c) { EXPECT_EQ(KM_CONFIG_RESET_NONE, c.offset_reset); } },
		{ "net.mode=kernel", [](const km_config &c) { EXPECT_EQ(KM_CONFIG_NET_KERNEL, c.net_mode); } },
		{ "mirror.source.unavailable.ms=0", [](const km_config &c) { EXPECT_EQ(0u, c.source_unavailable_ms); } },
		{ "mirror.source.unavailable.ms=2min", [](const km_config &c) { EXPECT_EQ(120000u, c.source_unavailable_ms); } },
		{ "mirror.failed.retry.initial.backoff.ms=250", [](const km_config &c) { EXPECT_EQ(250u, c.failed_retry_initial_backoff_ms); } },
		{ "mirror.failed.retry.max.backoff.ms=1min", [](const km_config &c) { EXPECT_EQ(60000u, c.failed_retry_max_backoff_ms); } },
		{ "mirror.failed.retry.max.attempts=5", [](const km_config &c) { EXPECT_EQ(5u, c.failed_retry_max_attempts); } },
		{ "listeners=127.0.0.1:0", [](const km_config &c) {
			  EXPECT_STREQ("127.0.0.1", c.listener.host);
			  EXPECT_EQ(0, c.listener.port);
			  EXPECT_STREQ("127.0.0.1", c.advertised.host);
		  } },
		{ "listeners=0.0.0.0:9093", [](const km_config &c) {
			  EXPECT_STREQ("0.0.0.0", c.listener.host);
			  EXPECT_EQ(9093, c.listener.port);
			  EXPECT_EQ(hostname(), c.advertised.host);
		  } },
		{ "listeners=plaintext://:9094", [](const km_config &c) {
			  EXPECT_STREQ("", c.listener.host);
			  EXPECT_EQ(9094, c.listener.port);
		  } },
		{ "control.socket=/tmp/k.sock", [](const km_config &c) { EXPECT_STREQ("/tmp/k.sock", c.control_socket); } },
		{ "cluster.id=MkU3OEVBNTcwNTJENDM2Qk", [](const km_config &c) { EXPECT_TRUE(c.cluster_id_configured); } },
		{ "cluster.id=redpanda.43b1a9c6-2e31-4a4b", [](const km_config &c) { EXPECT_STREQ("redpanda.43b1a9c6-2e31-4a4b", c.cluster_id); } },
		{ "dpdk.port=0000:3b:00.1", [](const km_config &c) { EXPECT_STREQ("0000:3b:00.1", c.dpdk.port); } },
		{ "dpdk.port=3b:00.1", [](const km_config &c) { EXPECT_STREQ("3b:00.1", c.dpdk.port); } },
		{ "dpdk.port=net_tap0", [](const km_config &c) { EXPECT_STREQ("net_tap0", c.dpdk.port); } },
		{ "dpdk.netmask=/8", [](const km_config &c) { EXPECT_EQ(ip("255.0.0.0"), c.dpdk.netmask_be); } },
		{ "dpdk.netmask=32", [](const km_config &c) { EXPECT_EQ(ip("255.255.255.255"), c.dpdk.netmask_be); } },
		{ "dpdk.netmask=0", [](const km_config &c) { EXPECT_EQ(0u, c.dpdk.netmask_be); } },
		{ "dpdk.netmask=255.255.255.128", [](const km_config &c) { EXPECT_EQ(ip("255.255.255.128"), c.dpdk.netmask_be); } },
		{ "dpdk.eal.args=-l 0\t--no-pci", [](const km_config &c) { EXPECT_STREQ("-l 0\t--no-pci", c.dpdk.eal_args); } },
		{ "config.sync.interval.ms=0", [](const km_config &c) { EXPECT_EQ(0u, c.config_sync_interval_ms); } },
		{ "config.sync.interval.ms=5s", [](const km_config &c) { EXPECT_EQ(5000u, c.config_sync_interval_ms); } },
		{ "config.sync.exclude=retention.ms, segment.bytes", [](const km_config &c) {
			  ASSERT_EQ(2u, c.config_sync_exclude_count);
			  EXPECT_STREQ("retention.ms", c.config_sync_exclude[0]);
			  EXPECT_STREQ("segment.bytes", c.config_sync_exclude[1]);
		  } },
		{ "config.sync.exclude=None", [](const km_config &c) { EXPECT_EQ(0u, c.config_sync_exclude_count); } },
	};
	for (const Good &g : cases) {
		Loaded l = load(nullptr, { "data.dir=/d", g.set });
		ASSERT_EQ(0, l.rc) << g.set << ": " << l.err;
		g.check(*l.cfg);
	}
}

TEST(Config, ListsAtTheirLimits)
{
	std::string topics, servers;
	for (unsigned i = 0; i < KM_CONFIG_TOPICS_MAX; i++)
		topics += (i ? "," : "") + std::string("t") + std::to_string(i);
	for (unsigned i = 0; i < KM_CONFIG_BOOTSTRAP_MAX; i++)
		servers += (i ? "," : "") + std::string("h") + std::to_string(i) + ":1";
	std::string long_topic(249, 'x');
	Loaded l = load(nullptr, { "data.dir=/d", "topics=" + topics,
				   "source.bootstrap.servers=" + servers });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(KM_CONFIG_TOPICS_MAX, l->topics_count);
	EXPECT_EQ(KM_CONFIG_BOOTSTRAP_MAX, l->bootstrap_count);
	l = load(nullptr, { "data.dir=/d", "topics=" + long_topic,
			    "source.bootstrap.servers=h:1" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(long_topic, l->topics[0]);
}

// ---- bad values: the whole message, since --set carries no path ----

struct Bad {
	std::string set;
	std::string detail; // after `--set: KEY: invalid value "VALUE": `
};

TEST(Config, BadValues)
{
	const std::string t250(250, 't');
	const std::string p1024(1024, 'p');
	const std::string s108 = "/" + std::string(107, 's');
	std::string t129, h17, w64;
	for (int i = 0; i < 129; i++)
		t129 += (i ? "," : "") + std::string("t") + std::to_string(i);
	for (int i = 0; i < 17; i++)
		h17 += (i ? "," : "") + std::string("h") + std::to_string(i) + ":1";
	for (int i = 0; i < 64; i++)
		w64 += (i ? " -x" : "-x");
	const Bad cases[] = {
		{ "data.dir=a\tb", "contains a control character" },
		{ "data.dir=" + p1024, "longer than 1023 bytes" },
		{ "source.bootstrap.servers=host", "\"host\": no port (expected host:port)" },
		{ "source.bootstrap.servers=h:0", "\"h:0\": port must be a number from 1 to 65535" },
		{ "source.bootstrap.servers=h:65536", "\"h:65536\": port must be a number from 1 to 65535" },
		{ "source.bootstrap.servers=h:x", "\"h:x\": port must be a number from 1 to 65535" },
		{ "source.bootstrap.servers=h:", "\"h:\": port must be a number from 1 to 65535" },
		{ "source.bootstrap.servers=:9092", "\":9092\": missing host" },
		{ "source.bootstrap.servers=::1:9092", "\"::1:9092\": an IPv6 address needs brackets, e.g. [::1]:9092" },
		{ "source.bootstrap.servers=[::1:9092", "\"[::1:9092\": missing ']' after the IPv6 address" },
		{ "source.bootstrap.servers=[zz]:1", "\"[zz]:1\": not an IPv6 address" },
		{ "source.bootstrap.servers=[::1]9092", "\"[::1]9092\": no port (expected host:port)" },
		{ "source.bootstrap.servers=SSL://h:1", "\"SSL://h:1\": source.bootstrap.servers takes host:port (PLAINTEXT:// at most); TLS and SASL to the source are set by source.security.protocol" },
		{ "source.bootstrap.servers=a:1,,b:2", "empty entry in the list" },
		{ "source.bootstrap.servers=a:1,", "empty entry in the list" },
		{ "source.bootstrap.servers=bad host!:1", "\"bad host!:1\": not a valid host name" },
		{ "source.bootstrap.servers=-x:1", "\"-x:1\": not a valid host name" },
		{ "source.bootstrap.servers=" + h17, "more than 16 entries" },
		{ "topics=a,.", "a topic name cannot be \".\" or \"..\"" },
		{ "topics=..", "a topic name cannot be \".\" or \"..\"" },
		{ "topics=a b", "topic \"a b\" contains a character other than ASCII alphanumerics, '.', '_' and '-'" },
		{ "topics=ok,t$", "topic \"t$\" contains a character other than ASCII alphanumerics, '.', '_' and '-'" },
		{ "topics=ok," + t250, "topic 2 is longer than 249 characters" },
		{ "topics=a,b,a", "topic \"a\" is listed twice" },
		{ "topics=" + t129, "more than 128 entries" },
		{ "listeners=a:1,b:2", "listener name PLAINTEXT appears twice (each listener needs its own)" },
		{ "listeners=PLAINTEXT://:1,SSL://:1", "port 1 appears twice (each listener needs its own)" },
		{ "listeners=A B://:9093", "\"A B://:9093\": a listener name is letters, digits, _ and -" },
		{ "listeners=://:9093", "\"://:9093\": a listener name of 1 to 31 characters before ://" },
		{ "listeners=A://:1,B://:2,C://:3,D://:4,E://:5", "more than 4 entries" },
		{ "listener.security.protocol.map=X:TLS", "\"X:TLS\": the protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL" },
		{ "listener.security.protocol.map=X", "\"X\": expected NAME:PROTOCOL" },
		{ "ssl.client.auth=maybe", "expected none, requested or required" },
		{ "listeners=:99999", "\":99999\": port must be a number from 0 to 65535" },
		{ "listeners=[fe80::1%eth0]:1", "\"[fe80::1%eth0]:1\": not an IPv6 address" },
		{ "advertised.listeners=0.0.0.0:9092", "\"0.0.0.0:9092\": clients cannot connect to a wildcard address; name this host" },
		{ "advertised.listeners=PLAINTEXT://:9092", "\":9092\": missing host" },
		{ "advertised.listeners=h:0", "\"h:0\": port must be a number from 1 to 65535" },
		{ "control.socket=" + s108, "longer than 107 bytes (the limit of a Unix socket path)" },
		{ "cluster.id=a b", "a cluster id is 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'" },
		{ "cluster.id=" + std::string(65, 'c'), "a cluster id is 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'" },
		{ "node.id=-1", "must be between 0 and 2147483647" },
		{ "node.id=2147483648", "must be between 0 and 2147483647" },
		{ "node.id=abc", "not a whole number" },
		{ "node.id=1K", "not a whole number" },
		{ "workers=0", "must be between 1 and 64" },
		{ "transaction.ids.max=0", "must be between 1 and 1048576" },
		{ "topics=__transaction_state", "topic \"__transaction_state\" is kmirrord's own (the transaction coordinator's log)" },
		{ "workers=65", "must be between 1 and 64" },
		{ "workers=four", "not a whole number" },
		{ "mirror.failed.retry.initial.backoff.ms=0", "must be between 1 and 2147483647" },
		{ "workers=1.5", "not a whole number" },
		{ "net.mode=xdp", "expected kernel or dpdk" },
		{ "dpdk.eal.args=-l 0 \"--vdev=x\"", "quotes are not supported: arguments are split at blanks" },
		{ "dpdk.eal.args=" + w64, "more than 63 arguments" },
		{ "dpdk.port=eth0", "expected a PCI address (0000:01:00.0) or a DPDK vdev (net_af_packet0,iface=veth0)" },
		{ "dpdk.port=0000:01:00.8", "expected a PCI address (0000:01:00.0) or a DPDK vdev (net_af_packet0,iface=veth0)" },
		{ "dpdk.port=net_", "expected a PCI address (0000:01:00.0) or a DPDK vdev (net_af_packet0,iface=veth0)" },
		{ "dpdk.port=net_tap0,iface=a b", "expected a PCI address (0000:01:00.0) or a DPDK vdev (net_af_packet0,iface=veth0)" },
		{ "dpdk.ip=10.0.0", "not an IPv4 address (a dotted quad such as 10.0.0.2)" },
		{ "dpdk.ip=0.0.0.0", "not a unicast address for a port" },
		{ "dpdk.ip=224.0.0.1", "not a unicast address for a port" },
		{ "dpdk.ip=127.0.0.1", "not a unicast address for a port" },
		{ "dpdk.ip=255.255.255.255", "not a unicast address for a port" },
		{ "dpdk.gateway=1.2.3", "not an IPv4 address (a dotted quad such as 10.0.0.2)" },
		{ "dpdk.netmask=255.0.255.0", "not a contiguous netmask" },
		{ "dpdk.netmask=33", "a prefix length is 0 to 32" },
		{ "dpdk.netmask=abc", "not a netmask (255.255.255.0 or a prefix length such as 24)" },
		{ "dpdk.netmask=255.255.0", "not a netmask (255.255.255.0 or a prefix length such as 24)" },
		{ "dpdk.mac=01:00:5e:00:00:01", "a multicast address (odd first byte) cannot be a port's address" },
		{ "dpdk.mac=00:00:00:00:00:00", "the all-zero address is not a port's address" },
		{ "dpdk.mac=02:00:00:00:00", "expected six hex bytes such as 02:00:00:00:00:01" },
		{ "dpdk.mac=02-00-00-00-00-01", "expected six hex bytes such as 02:00:00:00:00:01" },
		{ "segment.bytes=1023", "must be between 1024 and 2147483647" },
		{ "segment.bytes=2G", "must be between 1024 and 2147483647" },
		{ "segment.bytes=-1", "must be between 1024 and 2147483647" },
		{ "segment.bytes=64MB", "\"MB\" is ambiguous: use K, M or G (powers of 1024) or a plain number of bytes" },
		{ "segment.bytes=1.5G", "not a whole number" },
		{ "segment.bytes=64Q", "unknown unit \"Q\" (use a number of bytes, or K, KiB, M, MiB, G or GiB)" },
		{ "segment.bytes=1T", "unknown unit \"T\" (use a number of bytes, or K, KiB, M, MiB, G or GiB)" },
		{ "segment.bytes=99999999999999999999", "number too large" },
		{ "segment.bytes=99999999999G", "number too large" },
		{ "segment.bytes=G", "not a whole number" },
		{ "flush=sometimes", "expected interval or always" },
		{ "flush.ms=1d", "unknown unit \"d\" (use a number of milliseconds, or ms, s, min or h)" },
		{ "flush.ms=2147483648", "must be between 0 and 2147483647" },
		{ "flush.bytes=0", "must be between 1 and 9223372036854775807" },
		{ "stop.mode=crash", "expected truncate or abort" },
		{ "mirror.offset.reset=latest", "expected none or earliest" },
		{ "fetch.max.bytes=100", "must be between 1024 and 2147483647" },
		{ "fetch.max.wait.ms=600h", "must be between 0 and 2147483647" },
		{ "batch.max.bytes=60", "must be between 61 and 67108864" },
		{ "batch.max.bytes=65M", "must be between 61 and 67108864" },
		{ "dpdk.mtu=9001", "must be between 0 and 9000" },
		{ "log.level=trace", "expected error, warn, info or debug" },
		{ "groups.include=app-(", "a comma-separated list of POSIX extended regular expressions, each matching a whole name: \"app-(\": Unmatched ( or \\(" },
		{ "groups.exclude=a{2,1}", "a comma-separated list of POSIX extended regular expressions, each matching a whole name: \"a{2,1}\": Invalid content of \\{\\}" },
		{ "config.sync.exclude=a,a", "\"a\" is listed twice" },
		{ "config.sync.exclude=a,,b", "empty entry in the list" },
		{ "config.sync.interval.ms=2147483648", "must be between 0 and 2147483647" },
		{ "local.topics=big:1048577", "partitions of \"big\" must be 1 to 1048576" },
		{ "local.topics=big:0", "partitions of \"big\" must be 1 to 1048576" },
		{ "partitions.max=1048577", "must be between 0 and 1048576" },
	};
	for (const Bad &b : cases) {
		Loaded l = load(nullptr, { "data.dir=/d", b.set });
		size_t eq = b.set.find('=');
		std::string key = b.set.substr(0, eq), value = b.set.substr(eq + 1);
		if (value.size() > 80)
			value = value.substr(0, 80) + "...";
		for (size_t i = 0; i < value.size(); i++)
			if (value[i] == '\t')
				value.replace(i, 1, "\\x09");
		EXPECT_EQ(KM_ECFGVALUE, l.rc) << b.set;
		EXPECT_EQ("--set: " + key + ": invalid value \"" + value + "\": " + b.detail,
			  l.err);
	}
}

// ---- exact texts from a file: unknown keys and a bad enum ----

TEST(Config, UnknownKeyNamesKeyFileAndLine)
{
	TempDir d;
	struct {
		const char *line;
		std::string msg;
	} cases[] = {
		{ "segment.byte=1", "unknown key \"segment.byte\" (did you mean \"segment.bytes\"?)" },
		{ "frobnicate=1", "unknown key \"frobnicate\"" },
		{ "dpdk.queues=4", "unknown key \"dpdk.queues\" (the dpdk keys are dpdk.eal.args, dpdk.port, dpdk.ip, dpdk.netmask, dpdk.gateway, dpdk.mac and dpdk.mtu)" },
		{ "log.dirs=/x", "unknown key \"log.dirs\" (did you mean \"data.dir\"?)" },
		{ "bootstrap.servers=h:1", "unknown key \"bootstrap.servers\" (did you mean \"source.bootstrap.servers\"?)" },
		{ "Topics=a", "unknown key \"Topics\" (did you mean \"topics\"?)" },
		{ "=value", "empty key" },
	};
	for (auto &c : cases) {
		std::string path = d.file("k.properties",
					  std::string("data.dir=/d\n# two\n\n") + c.line + "\n");
		Loaded l = load(path.c_str());
		EXPECT_EQ(KM_ECFGKEY, l.rc) << c.line;
		EXPECT_EQ(path + ":4: " + c.msg, l.err);
	}
}

TEST(Config, UnknownKeyBeatsLaterValueErrors)
{
	TempDir d;
	std::string path = d.file("k.properties", "workers=zero\nnope=1\n");
	Loaded l = load(path.c_str());
	EXPECT_EQ(KM_ECFGKEY, l.rc);
	EXPECT_EQ(path + ":2: unknown key \"nope\"", l.err);
}

TEST(Config, BadEnumNamesFileLineKeyAndValue)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nnet.mode = xdp\nstop.mode=abort\n");
	Loaded l = load(path.c_str());
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_EQ(path + ":2: net.mode: invalid value \"xdp\": expected kernel or dpdk",
		  l.err);
	EXPECT_STREQ("invalid configuration value", km_strerror(l.rc));
}

TEST(Config, ErrorLineIsWhereAContinuedLineStarts)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nsource.bootstrap.servers=h:1\n"
				  "topics=a,\\\n  b,\\\n  c d\n");
	Loaded l = load(path.c_str());
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_EQ(path + ":3: topics: invalid value \"a,b,c d\": topic \"c d\" contains a character other than ASCII alphanumerics, '.', '_' and '-'",
		  l.err);
}

TEST(Config, CommentsContinuationsAndEscapesInAFile)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "# mirror host A\r\n"
				  "! also a comment\r\n"
				  "data.dir : /data/with\\ space\\\\and\\u00e9\r\n"
				  "source.bootstrap.servers   src:9092\r\n"
				  "topics = orders, \\\r\n"
				  "         payments,\\\r\n"
				  "         audit   \r\n"
				  "dpdk.eal.args = -l 0 \\\n   --no-pci\n");
	Loaded l = load(path.c_str());
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("/data/with space\\and\xc3\xa9", l->data_dir);
	ASSERT_EQ(3u, l->topics_count);
	EXPECT_STREQ("audit", l->topics[2]);
	EXPECT_STREQ("src", l->bootstrap[0].host);
	EXPECT_STREQ("-l 0 --no-pci", l->dpdk.eal_args);
}

TEST(Config, SyntaxErrorNamesFileAndLine)
{
	TempDir d;
	std::string path = d.file("k.properties", "data.dir=/d\ncluster.id=\\u12\n");
	Loaded l = load(path.c_str());
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	EXPECT_EQ(path + ":2: malformed \\uxxxx escape (needs 4 hex digits, a whole surrogate pair, not \\u0000)",
		  l.err);
}

// ---- overrides and duplicates ----

TEST(Config, SetOverridesFileInOrder)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nworkers=2\nlog.level=warn\n");
	Loaded l = load(path.c_str(), { "workers=8", " log.level = debug ",
					"workers=3" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(3u, l->workers);
	EXPECT_EQ(KM_LOG_DEBUG, l->log_level);
}

TEST(Config, SetReplacesABadFileValueBeforeItIsChecked)
{
	TempDir d;
	std::string path = d.file("k.properties", "data.dir=/d\nworkers=zero\n");
	Loaded l = load(path.c_str(), { "workers=3" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(3u, l->workers);
}

TEST(Config, SetValueMayContainEquals)
{
	Loaded l = load(nullptr, { "data.dir=/d", "dpdk.port=net_af_packet0,iface=veth0" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("net_af_packet0,iface=veth0", l->dpdk.port);
}

TEST(Config, EmptyValueResetsToDefault)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nsource.bootstrap.servers=h:1\n"
				  "topics=a\nworkers=9\n");
	Loaded l = load(path.c_str(), { "topics=", "source.bootstrap.servers=",
					"workers=" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(0u, l->topics_count);
	EXPECT_EQ(0u, l->bootstrap_count);
	EXPECT_EQ(km_config_default_workers(), l->workers);
}

TEST(Config, SetErrors)
{
	Loaded l = load(nullptr, { "data.dir=/d", "nokey" });
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	EXPECT_EQ("--set \"nokey\": expected key=value", l.err);
	l = load(nullptr, { "data.dir=/d", "bogus=1" });
	EXPECT_EQ(KM_ECFGKEY, l.rc);
	EXPECT_EQ("--set: unknown key \"bogus\"", l.err);
	l = load(nullptr, { "data.dir=/d", "worker=1" });
	EXPECT_EQ(KM_ECFGKEY, l.rc);
	EXPECT_EQ("--set: unknown key \"worker\" (did you mean \"workers\"?)", l.err);
}

TEST(Config, DuplicateKeysLastWins)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nworkers=2\ntopics=a,b\n"
				  "source.bootstrap.servers=h:1\nworkers=5\ntopics=c\n");
	Loaded l = load(path.c_str());
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(5u, l->workers);
	ASSERT_EQ(1u, l->topics_count) << "a list is replaced, not appended to";
	EXPECT_STREQ("c", l->topics[0]);
}

// ---- required keys and the checks between keys ----

TEST(Config, MissingRequired)
{
	TempDir d;
	std::string path = d.file("empty.properties", "# nothing\n");
	Loaded l = load(path.c_str());
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ(path + ": data.dir is required", l.err);

	l = load(nullptr);
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("data.dir is required", l.err);

	l = load(nullptr, { "data.dir=/d", "topics=a" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("topics is set but source.bootstrap.servers is not (a mirroring host needs both; a host that only serves local partitions sets neither)",
		  l.err);

	l = load(nullptr, { "data.dir=/d", "source.bootstrap.servers=h:1" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("source.bootstrap.servers is set but neither topics nor topics.include is (a mirroring host needs both; a host that only serves local partitions sets neither)",
		  l.err);
}

TEST(Config, LocalOnlyHostNeedsNeitherSourceNorTopics)
{
	Loaded l = load(nullptr, { "data.dir=/d" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(0u, l->topics_count);
}

TEST(Config, DpdkModeNeedsPortAndIp)
{
	Loaded l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.ip=10.0.0.2" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("net.mode=dpdk needs dpdk.port", l.err);
	l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.port=net_tap0" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("net.mode=dpdk needs dpdk.ip", l.err);
	l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.port=net_tap0",
			    "dpdk.ip=10.0.0.2", "dpdk.gateway=10.0.1.1" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("dpdk.gateway 10.0.1.1 is not in the subnet of dpdk.ip 10.0.0.2 with dpdk.netmask 255.255.255.0",
		  l.err);
	l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.port=net_tap0",
			    "dpdk.ip=10.0.0.2", "dpdk.gateway=10.0.1.1",
			    "dpdk.netmask=16" });
	EXPECT_EQ(0, l.rc) << l.err;
	/* dpdk.mtu: 0 is the port's own; below IPv4's 576 is no MTU. */
	l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.port=net_tap0",
			    "dpdk.ip=10.0.0.2", "dpdk.mtu=575" });
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_EQ("dpdk.mtu 575: 0 (the port's own) or 576..9000", l.err);
	l = load(nullptr, { "data.dir=/d", "net.mode=dpdk", "dpdk.port=net_tap0",
			    "dpdk.ip=10.0.0.2", "dpdk.mtu=576" });
	EXPECT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(576u, l->dpdk.mtu);
}

TEST(Config, DpdkKeysAreCheckedButIgnoredInKernelMode)
{
	Loaded l = load(nullptr, { "data.dir=/d", "dpdk.port=net_tap0",
				   "dpdk.gateway=192.168.9.9" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(KM_CONFIG_NET_KERNEL, l->net_mode);
	EXPECT_STREQ("net_tap0", l->dpdk.port);
	l = load(nullptr, { "data.dir=/d", "dpdk.port=eth0" });
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
}

TEST(Config, DefaultControlSocketMustFit)
{
	std::string dir = "/" + std::string(100, 'd');
	Loaded l = load(nullptr, { "data.dir=" + dir });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("the default control.socket (data.dir + \"/kmirrord.sock\") is longer than 107 bytes, the limit of a Unix socket path; set control.socket",
		  l.err);
	l = load(nullptr, { "data.dir=" + dir, "control.socket=/run/k.sock" });
	EXPECT_EQ(0, l.rc) << l.err;
}

// ---- the file itself ----

TEST(Config, FileErrors)
{
	TempDir d;
	Loaded l = load("/nonexistent/kmirrord.properties");
	EXPECT_EQ(-ENOENT, l.rc);
	EXPECT_EQ("cannot read /nonexistent/kmirrord.properties: No such file or directory",
		  l.err);
	l = load(d.path.c_str());
	EXPECT_EQ(-EISDIR, l.rc);
	EXPECT_EQ("cannot read " + d.path + ": Is a directory", l.err);
	std::string big = d.file("big.properties",
				 std::string(KM_CONFIG_FILE_BYTES_MAX + 1, '#'));
	l = load(big.c_str());
	EXPECT_EQ(-EFBIG, l.rc);
	EXPECT_EQ("cannot read " + big + ": larger than 1 MiB", l.err);
	std::string limit = d.file("limit.properties",
				   std::string(KM_CONFIG_FILE_BYTES_MAX - 12, '#') +
					   "\ndata.dir=/d");
	l = load(limit.c_str());
	EXPECT_EQ(0, l.rc) << l.err;
}

TEST(Config, ReadsFromAPipe)
{
	int fds[2];
	ASSERT_EQ(0, pipe(fds));
	const char text[] = "data.dir=/piped\n";
	ASSERT_EQ((ssize_t)sizeof(text) - 1, write(fds[1], text, sizeof(text) - 1));
	close(fds[1]);
	std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
	Loaded l = load(path.c_str());
	close(fds[0]);
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("/piped", l->data_dir);
}

// ---- what the daemon takes from the struct ----

TEST(Config, LogConfigForAPartition)
{
	Loaded l = load(nullptr, { "data.dir=/d", "segment.bytes=64M",
				   "flush.ms=10", "flush.bytes=1M",
				   "flush=always", "batch.max.bytes=2M" });
	ASSERT_EQ(0, l.rc) << l.err;
	km_log_config lc, def;
	km_config_log_config(l.cfg.get(), "orders", 3, &lc);
	km_log_config_defaults(&def, "/d", "orders", 3);
	EXPECT_EQ(l->data_dir, lc.data_dir) << "points into the config";
	EXPECT_STREQ("orders", lc.topic);
	EXPECT_EQ(3, lc.partition);
	EXPECT_EQ(64ull << 20, lc.segment_bytes);
	EXPECT_EQ(10u, lc.flush_interval_ms);
	EXPECT_EQ(1ull << 20, lc.flush_bytes);
	EXPECT_TRUE(lc.flush_always);
	EXPECT_EQ(2u << 20, lc.batch_bytes_max);
	EXPECT_EQ(def.index_interval_bytes, lc.index_interval_bytes);
	EXPECT_EQ(def.index_bytes_max, lc.index_bytes_max);
	EXPECT_EQ(def.prealloc_bytes, lc.prealloc_bytes);
	EXPECT_EQ(def.segments_max, lc.segments_max);
	EXPECT_EQ(def.pstate.producers_max, lc.pstate.producers_max);
}

// Compaction (issue 19): topic.cleanup.policy names the compacted topics;
// the log gets cfg.compact and the cleaner's settings.
// Kafka's auto.create.topics.enable (off here by default) and num.partitions.
TEST(Config, AutoCreateTopicsAndNumPartitions)
{
	Loaded l = load(nullptr, { "data.dir=/d", "auto.create.topics.enable=true",
				   "num.partitions=3" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(1, l.cfg->auto_create_topics);
	EXPECT_EQ(3u, l.cfg->num_partitions);
	Loaded dflt = load(nullptr, { "data.dir=/d" });
	ASSERT_EQ(0, dflt.rc) << dflt.err;
	EXPECT_EQ(0, dflt.cfg->auto_create_topics);
	EXPECT_EQ(1u, dflt.cfg->num_partitions);
	EXPECT_NE(0, load(nullptr, { "data.dir=/d", "num.partitions=0" }).rc);
	EXPECT_NE(0, load(nullptr, { "data.dir=/d",
				     "auto.create.topics.enable=yes" }).rc);
}

TEST(Config, CleanupPolicyPerTopic)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				   "topic.cleanup.policy=users:compact,orders:delete",
				   "delete.retention.ms=5s",
				   "log.cleaner.dedupe.buffer.size=1M",
				   "min.cleanable.dirty.ratio=0.01" });
	ASSERT_EQ(0, l.rc) << l.err;
	km_log_config lc;
	km_config_log_config(l.cfg.get(), "users", 0, &lc);
	EXPECT_TRUE(lc.compact);
	EXPECT_EQ(5000, lc.delete_retention_ms);
	EXPECT_EQ(1ull << 20, lc.cleaner_map_bytes);
	EXPECT_EQ(0.01, lc.min_cleanable_ratio);
	km_config_log_config(l.cfg.get(), "orders", 0, &lc);
	EXPECT_FALSE(lc.compact);
	km_config_log_config(l.cfg.get(), "other", 0, &lc);
	EXPECT_FALSE(lc.compact);
	std::vector<char> text(64 * 1024);
	int n = km_config_format(l.cfg.get(), text.data(), text.size());
	ASSERT_GT(n, 0);
	EXPECT_NE(std::string::npos,
		  std::string(text.data(), n)
			  .find("topic.cleanup.policy=users:compact,orders:delete\n"));
	EXPECT_NE(0, load(nullptr, { "data.dir=/d",
				     "topic.cleanup.policy=users:gone" }).rc);
	EXPECT_NE(0, load(nullptr, { "data.dir=/d",
				     "topic.cleanup.policy=users" }).rc);
	EXPECT_NE(0, load(nullptr, { "data.dir=/d",
				     "min.cleanable.dirty.ratio=1.5" }).rc);
	EXPECT_NE(0, load(nullptr, { "data.dir=/d",
				     "min.cleanable.dirty.ratio=half" }).rc);
}

TEST(Config, DefaultsMatchTheLogsDefaults)
{
	Loaded l = load(nullptr, { "data.dir=/d" });
	ASSERT_EQ(0, l.rc);
	km_log_config lc, def;
	km_config_log_config(l.cfg.get(), "t", 0, &lc);
	km_log_config_defaults(&def, "/d", "t", 0);
	EXPECT_EQ(def.segment_bytes, lc.segment_bytes);
	EXPECT_EQ(def.flush_interval_ms, lc.flush_interval_ms);
	EXPECT_EQ(def.flush_bytes, lc.flush_bytes);
	EXPECT_EQ(def.flush_always, lc.flush_always);
	EXPECT_EQ(def.batch_bytes_max, lc.batch_bytes_max);
	EXPECT_EQ(def.delete_retention_ms, lc.delete_retention_ms);
	EXPECT_EQ(def.cleaner_map_bytes, lc.cleaner_map_bytes);
	EXPECT_EQ(def.min_cleanable_ratio, lc.min_cleanable_ratio);
	EXPECT_FALSE(lc.compact);
}

TEST(Config, EalArgv)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				   "dpdk.eal.args=-l 0  --in-memory\t--vdev=net_tap0 " });
	ASSERT_EQ(0, l.rc) << l.err;
	char buf[256];
	char *argv[8];
	ASSERT_EQ(5, km_config_eal_argv(l.cfg.get(), "kmirrord", buf, sizeof(buf),
					argv, 8));
	EXPECT_STREQ("kmirrord", argv[0]);
	EXPECT_STREQ("-l", argv[1]);
	EXPECT_STREQ("0", argv[2]);
	EXPECT_STREQ("--in-memory", argv[3]);
	EXPECT_STREQ("--vdev=net_tap0", argv[4]);
	EXPECT_EQ(-ENOSPC, km_config_eal_argv(l.cfg.get(), "kmirrord", buf,
					      sizeof(buf), argv, 4));
	EXPECT_EQ(-ENOSPC, km_config_eal_argv(l.cfg.get(), "kmirrord", buf, 20,
					      argv, 8));
	l = load(nullptr, { "data.dir=/d" });
	EXPECT_EQ(1, km_config_eal_argv(l.cfg.get(), "k", buf, sizeof(buf), argv, 8));
}

TEST(Config, FormatReadsBackToTheSameStruct)
{
	TempDir d;
	std::string path = d.file("full.properties", kFullFile);
	const char *samples[][2] = {
		{ path.c_str(), nullptr },
		{ nullptr, "data.dir=/d" },
		{ nullptr, "data.dir=/with space\\and#hash" },
	};
	for (auto &s : samples) {
		Loaded a = s[0] ? load(s[0]) : load(nullptr, { s[1] });
		ASSERT_EQ(0, a.rc) << a.err;
		std::vector<char> text(64 * 1024);
		int n = km_config_format(a.cfg.get(), text.data(), text.size());
		ASSERT_GT(n, 0);
		std::string again = d.file("again.properties", std::string(text.data(), n));
		Loaded b = load(again.c_str());
		ASSERT_EQ(0, b.rc) << b.err << "\n" << text.data();
		EXPECT_EQ(0, memcmp(a.cfg.get(), b.cfg.get(), sizeof(km_config)))
			<< text.data();
		EXPECT_EQ(-ENOSPC, km_config_format(a.cfg.get(), text.data(), n));
	}
}

// config.sync.exclude=none (exclude nothing) is written back as "none":
// left out, it would read back as the default list.
TEST(Config, SyncExcludeNoneReadsBack)
{
	TempDir d;
	Loaded a = load(nullptr, { "data.dir=/d", "config.sync.exclude=none" });
	ASSERT_EQ(0, a.rc) << a.err;
	std::vector<char> text(64 * 1024);
	int n = km_config_format(a.cfg.get(), text.data(), text.size());
	ASSERT_GT(n, 0);
	EXPECT_NE(nullptr, strstr(text.data(), "\nconfig.sync.exclude=none\n")) << text.data();
	std::string again = d.file("again.properties", std::string(text.data(), n));
	Loaded b = load(again.c_str());
	ASSERT_EQ(0, b.rc) << b.err;
	EXPECT_EQ(0u, b->config_sync_exclude_count);
}

TEST(Config, FormatText)
{
	Loaded l = load(nullptr, { "data.dir=/d", "listeners=127.0.0.1:9092",
				   "workers=1" });
	ASSERT_EQ(0, l.rc);
	char text[4096];
	ASSERT_GT(km_config_format(l.cfg.get(), text, sizeof(text)), 0);
	EXPECT_EQ(std::string("data.dir=/d\n"
			      "topics.exclude=__.*\n"
			      "metadata.refresh.interval.ms=30000\n"
			      "partitions.max=0\n"
			      "listeners=PLAINTEXT://127.0.0.1:9092\n"
			      "control.socket=/d/kmirrord.sock\n"
			      "node.id=1\n"
			      "workers=1\n"
			      "net.mode=kernel\n"
			      "dpdk.netmask=255.255.255.0\n"
			      "segment.bytes=1073741824\n"
			      "flush=interval\n"
			      "flush.ms=1000\n"
			      "flush.bytes=67108864\n"
			      "stop.mode=truncate\n"
			      "mirror.offset.reset=none\n"
			      "fetch.max.bytes=52428800\n"
			      "fetch.max.wait.ms=500\n"
			      "batch.max.bytes=67108864\n"
			      "retention.ms=-1\n"
			      "retention.bytes=-1\n"
			      "disk.free.min.bytes=268435456\n" "group.sync.interval.ms=5000\n" "group.sync.stop.timeout.ms=2000\n" "group.initial.rebalance.delay.ms=3000\n" "group.min.session.timeout.ms=6000\n" "group.max.session.timeout.ms=1800000\n" "socket.request.max.bytes=104857600\n" "listener.request.timeout.ms=30000\n"
			      "log.level=info\n"
			      "mirror.throttle.bytes.per.sec=0\n"
			      "mirror.source.unavailable.ms=300000\n"
			      "mirror.failed.retry.initial.backoff.ms=1000\n"
			      "mirror.failed.retry.max.backoff.ms=60000\n"
			      "mirror.failed.retry.max.attempts=0\n"
			      "config.sync.interval.ms=600000\n"
			      "config.sync.exclude=follower.replication.throttled.replicas,"
			      "leader.replication.throttled.replicas,min.insync.replicas,"
			      "unclean.leader.election.enable,message.timestamp.before.max.ms,"
			      "message.timestamp.after.max.ms\n"
			      "delete.retention.ms=86400000\n"
			      "log.cleaner.dedupe.buffer.size=134217728\n"
			      "min.cleanable.dirty.ratio=0.5\n"
			      "source.security.protocol=PLAINTEXT\n"
			      "source.ssl.endpoint.identification.algorithm=https\n"
			      "transaction.ids.max=1024\n"
			      "transactional.id.expiration.ms=604800000\n"
			      "auto.create.topics.enable=false\n"
			      "num.partitions=1\n"
			      "ssl.client.auth=none\n"
			      "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n"
			      "connections.max.reauth.ms=0\n"
			      "acls.sync=false\n"
			      "acls.sync.interval.ms=600000\n"
			      "allow.everyone.if.no.acl.found=false\n"
			      "max.incremental.fetch.session.cache.slots=1000\n"
			      "dpdk.mtu=0\n"
			      "log.direct.io=true\n"
			      "log.tail.cache.bytes=16777216\n"),
		  text);
}

// ---- kmirrord's arguments ----

Loaded load_args(std::vector<const char *> argv)
{
	Loaded l;
	char err[KM_CONFIG_ERR_BYTES_MAX];
	l.rc = km_config_load_args(l.cfg.get(), (int)argv.size(), argv.data(),
				   err, sizeof(err));
	l.err = err;
	return l;
}

TEST(Config, Arguments)
{
	TempDir d;
	std::string path = d.file("k.properties", "data.dir=/d\nworkers=2\n");
	Loaded l = load_args({ "kmirrord", "--config", path.c_str(), "--set",
			       "workers=3", "--set=log.level=debug" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(3u, l->workers);
	EXPECT_EQ(KM_LOG_DEBUG, l->log_level);
	std::string eq = "--config=" + path;
	l = load_args({ "kmirrord", eq.c_str() });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(2u, l->workers);
	l = load_args({ "kmirrord", "--set", "data.dir=/e" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("/e", l->data_dir);

	l = load_args({ "kmirrord", "--bogus" });
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	EXPECT_EQ("--bogus is not an option", l.err);
	l = load_args({ "kmirrord", "data.dir=/e" });
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	EXPECT_EQ("data.dir=/e is not an option (a setting is --set data.dir=/e)",
		  l.err);
	l = load_args({ "kmirrord", "--configx" });
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	l = load_args({ "kmirrord", "--config", path.c_str(), "--set" });
	EXPECT_EQ(KM_ECFGSYNTAX, l.rc);
	EXPECT_EQ("--set needs a value", l.err);
	l = load_args({ "kmirrord" });
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("no configuration: pass --config FILE (or --set key=value settings); data.dir is required",
		  l.err);
}

TEST(Config, ErrorCodesAreNamed)
{
	const int codes[] = { KM_ECFGSYNTAX, KM_ECFGKEY, KM_ECFGVALUE,
			      KM_ECFGMISSING, KM_EMETAPROPS, KM_EMETAMISMATCH };
	for (int c : codes) {
		EXPECT_LE(c, -10080);
		EXPECT_GT(c, KM_ELAST);
		EXPECT_STRNE("unknown kmirror error", km_strerror(c));
	}
}

} // namespace

// ---- topic discovery (issue 19 item 1) ----

/* topics.include/topics.exclude are anchored ERE lists: a file's backslash
 * is an escape as in Java's properties ("\\." is the expression "\."), a
 * bad expression is named with regerror's reason, and include alone is a
 * mirroring host's topic list. */
TEST(Config, TopicsIncludeIsAnAnchoredExpressionList)
{
	TempDir d;
	std::string path = d.file("k.properties",
				  "data.dir=/d\nsource.bootstrap.servers=h:9092\n"
				  "topics.include=orders\\\\..*, pay(ments|outs)\n");
	Loaded l = load(path.c_str());
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("orders\\..*, pay(ments|outs)", l->topics_include);
	EXPECT_STREQ("__.*", l->topics_exclude);
	km_namefilter f;
	char why[256];
	ASSERT_EQ(0, km_namefilter_compile(&f, l->topics_include, why, sizeof(why))) << why;
	EXPECT_TRUE(km_namefilter_match(&f, "orders.eu"));
	EXPECT_FALSE(km_namefilter_match(&f, "ordersXeu"));
	EXPECT_FALSE(km_namefilter_match(&f, "xorders.eu"));
	EXPECT_TRUE(km_namefilter_match(&f, "payouts"));
	EXPECT_FALSE(km_namefilter_match(&f, "payments2"));
	km_namefilter_free(&f);
	/* A comma inside {}, [] or () is the expression's, not the list's. */
	ASSERT_EQ(0, km_namefilter_compile(&f, "x{2,3},y[,;]z,(p|q,r)", why, sizeof(why))) << why;
	EXPECT_EQ(3u, f.n);
	EXPECT_TRUE(km_namefilter_match(&f, "xxx"));
	EXPECT_FALSE(km_namefilter_match(&f, "xxxx"));
	EXPECT_TRUE(km_namefilter_match(&f, "y,z"));
	EXPECT_TRUE(km_namefilter_match(&f, "q,r"));
	km_namefilter_free(&f);

	Loaded bad = load(nullptr, { "data.dir=/d", "topics.include=a,(b" });
	EXPECT_EQ(KM_ECFGVALUE, bad.rc);
	EXPECT_NE(std::string::npos, bad.err.find("topics.include")) << bad.err;
	EXPECT_NE(std::string::npos, bad.err.find("\"(b\"")) << bad.err;
	Loaded empty = load(nullptr, { "data.dir=/d", "topics.exclude=a,,b" });
	EXPECT_EQ(KM_ECFGVALUE, empty.rc);
	EXPECT_NE(std::string::npos, empty.err.find("empty expression")) << empty.err;
	Loaded lone = load(nullptr, { "data.dir=/d", "topics.include=a" });
	EXPECT_EQ(KM_ECFGMISSING, lone.rc);
	EXPECT_NE(std::string::npos, lone.err.find("topics.include is set but source.bootstrap.servers is not"))
		<< lone.err;
}

/* mirror.throttle.bytes.per.sec (issue 19 item 8): a byte size, 0 for
 * none, at most a TiB/s; topic.mirror.throttle.bytes.per.sec a NAME:RATE
 * list as topic.retention.bytes, -1 for none; both read back. */
TEST(Config, ThrottleKeys)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				   "mirror.throttle.bytes.per.sec=10M",
				   "topic.mirror.throttle.bytes.per.sec=orders:512K,logs:-1" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(10u * 1024 * 1024, l->throttle_bytes_per_sec);
	ASSERT_EQ(2u, l->topic_throttle_count);
	EXPECT_STREQ("orders", l->topic_throttle[0].topic);
	EXPECT_EQ(512 * 1024, l->topic_throttle[0].value);
	EXPECT_STREQ("logs", l->topic_throttle[1].topic);
	EXPECT_EQ(-1, l->topic_throttle[1].value);
	char text[8192];
	ASSERT_GT(km_config_format(l.cfg.get(), text, sizeof(text)), 0);
	EXPECT_NE(std::string(text).find("mirror.throttle.bytes.per.sec=10485760\n"
					  "topic.mirror.throttle.bytes.per.sec=orders:524288,logs:-1\n"),
		  std::string::npos) << text;
	l = load(nullptr, { "data.dir=/d" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(0u, l->throttle_bytes_per_sec);
	EXPECT_EQ(0u, l->topic_throttle_count);
	for (const char *bad : { "mirror.throttle.bytes.per.sec=2T",
				 "mirror.throttle.bytes.per.sec=-1",
				 "mirror.throttle.bytes.per.sec=10MB",
				 "topic.mirror.throttle.bytes.per.sec=orders",
				 "topic.mirror.throttle.bytes.per.sec=orders:2048G" }) {
		l = load(nullptr, { "data.dir=/d", bad });
		EXPECT_EQ(KM_ECFGVALUE, l.rc) << bad;
		EXPECT_NE(l.err.find("throttle"), std::string::npos) << l.err;
	}
}

// Issue 16: the source.* security keys - Kafka's names and values, read
// back by the formatter; bad values and contradictions named; passwords
// only as files (no key holds one).
TEST(Config, SourceSecurityKeys)
{
	std::vector<std::string> base = { "data.dir=/d", "source.bootstrap.servers=h:9093",
					  "topics=t" };
	auto with = [&](std::vector<std::string> more) {
		std::vector<std::string> v = base;
		v.insert(v.end(), more.begin(), more.end());
		return v;
	};
	Loaded l = load(nullptr, with({ "source.security.protocol=SASL_SSL",
					"source.ssl.ca.location=/etc/k/ca.pem",
					"source.ssl.certificate.location=/etc/k/me.pem",
					"source.ssl.key.location=/etc/k/me.key",
					"source.ssl.key.password.file=/etc/k/key.pw",
					"source.ssl.endpoint.identification.algorithm=none",
					"source.sasl.mechanism=SCRAM-SHA-512",
					"source.sasl.username=mirror",
					"source.sasl.password.file=/etc/k/pw" }));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(3, l->source_security_protocol); // SASL_SSL
	EXPECT_STREQ("/etc/k/ca.pem", l->source_ssl_ca);
	EXPECT_STREQ("/etc/k/me.key", l->source_ssl_key);
	EXPECT_FALSE(l->source_ssl_verify_host);
	EXPECT_EQ(3, l->source_sasl_mechanism); // SCRAM-SHA-512
	EXPECT_STREQ("mirror", l->source_sasl_username);
	std::vector<char> text(64 * 1024);
	ASSERT_GT(km_config_format(l.cfg.get(), text.data(), text.size()), 0);
	for (const char *line : { "\nsource.security.protocol=SASL_SSL\n",
				  "\nsource.sasl.mechanism=SCRAM-SHA-512\n",
				  "\nsource.sasl.password.file=/etc/k/pw\n",
				  "\nsource.ssl.endpoint.identification.algorithm=none\n" })
		EXPECT_NE(nullptr, strstr(text.data(), line)) << line << text.data();

	l = load(nullptr, with({ "source.security.protocol=TLS" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("source.security.protocol")) << l.err;
	l = load(nullptr, with({ "source.ssl.endpoint.identification.algorithm=http" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("https, or none")) << l.err;
	l = load(nullptr, with({ "source.ssl.endpoint.identification.algorithm=" }));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_TRUE(l->source_ssl_verify_host) << "empty: the default, https";
	l = load(nullptr, with({ "source.security.protocol=SASL_PLAINTEXT",
				 "source.sasl.mechanism=GSSAPI" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")) << l.err;
	l = load(nullptr, with({ "source.security.protocol=SASL_SSL",
				 "source.sasl.mechanism=PLAIN", "source.sasl.username=u" }));
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_EQ("source.security.protocol=SASL_SSL needs source.sasl.password.file", l.err);
	l = load(nullptr, with({ "source.sasl.mechanism=PLAIN" }));
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("is not SASL_SSL or SASL_PLAINTEXT")) << l.err;
	l = load(nullptr, with({ "source.security.protocol=SSL",
				 "source.ssl.certificate.location=/c.pem" }));
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("go together")) << l.err;
	// No key takes a password itself.
	l = load(nullptr, with({ "source.sasl.password=x" }));
	EXPECT_EQ(KM_ECFGKEY, l.rc);
}

/* SASL on the listener (issue 16): the mechanisms as a set, Kafka's
 * GSSAPI and OAUTHBEARER refused by name, the users file and KIP-368's
 * session lifetime read and written back. */
TEST(Config, ListenerSaslKeys)
{
	std::vector<std::string> base = { "data.dir=/d", "source.bootstrap.servers=h:9093",
					  "topics=t" };
	auto with = [&](std::vector<std::string> more) {
		std::vector<std::string> v = base;
		v.insert(v.end(), more.begin(), more.end());
		return v;
	};
	Loaded l = load(nullptr, with({ "listeners=PLAINTEXT://:9092,SASL_PLAINTEXT://:9094",
					"sasl.enabled.mechanisms=SCRAM-SHA-512, PLAIN",
					"sasl.users.file=/etc/k/users",
					"connections.max.reauth.ms=1h" }));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ((1u << 1) | (1u << 3), l->sasl_enabled_mechanisms);
	EXPECT_STREQ("/etc/k/users", l->sasl_users_file);
	EXPECT_EQ(3600000u, l->connections_max_reauth_ms);
	std::vector<char> text(64 * 1024);
	ASSERT_GT(km_config_format(l.cfg.get(), text.data(), text.size()), 0);
	for (const char *line : { "\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n",
				  "\nsasl.users.file=/etc/k/users\n",
				  "\nconnections.max.reauth.ms=3600000\n" })
		EXPECT_NE(nullptr, strstr(text.data(), line)) << line << text.data();
	for (const char *bad : { "sasl.enabled.mechanisms=GSSAPI",
				 "sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
				 "sasl.enabled.mechanisms=," }) {
		l = load(nullptr, with({ bad }));
		EXPECT_EQ(KM_ECFGVALUE, l.rc) << bad;
		EXPECT_NE(std::string::npos, l.err.find("sasl.enabled.mechanisms")) << l.err;
	}
	/* A SASL listener needs the users, the users a SASL listener. */
	l = load(nullptr, with({ "listeners=SASL_SSL://:9093", "ssl.certificate.location=/c",
				 "ssl.key.location=/k" }));
	EXPECT_EQ(KM_ECFGMISSING, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("listener SASL_SSL (SASL_SSL) needs "
						"sasl.users.file")) << l.err;
	l = load(nullptr, with({ "sasl.users.file=/etc/k/users" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("no listener is SASL_PLAINTEXT or SASL_SSL"))
		<< l.err;
	l = load(nullptr, with({}));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ((1u << 2) | (1u << 3), l->sasl_enabled_mechanisms); /* SCRAM both */
	EXPECT_EQ(0u, l->connections_max_reauth_ms);
}

// Authorization's keys (issue 16): Kafka's names and defaults; any of
// authorizer.class.name, acls.file and acls.sync turns it on; an
// authorizer kmirrord does not follow is an error naming the key.
TEST(Config, AuthorizationKeys)
{
	std::vector<std::string> base = { "data.dir=/d", "source.bootstrap.servers=h:9093",
					  "topics=t" };
	auto with = [&](std::vector<std::string> more) {
		std::vector<std::string> v = base;
		v.insert(v.end(), more.begin(), more.end());
		return v;
	};
	Loaded l = load(nullptr, with({}));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_FALSE(km_config_authorizes(l.cfg.get()));
	EXPECT_EQ(600000u, l->acls_sync_interval_ms);
	EXPECT_EQ(0, l->allow_everyone_if_no_acl_found);
	for (const char *on : { "acls.file=/etc/k/acls", "acls.sync=true",
				"authorizer.class.name=org.apache.kafka.metadata."
				"authorizer.StandardAuthorizer" }) {
		l = load(nullptr, with({ on }));
		ASSERT_EQ(0, l.rc) << l.err;
		EXPECT_TRUE(km_config_authorizes(l.cfg.get())) << on;
	}
	l = load(nullptr, with({ "super.users=User:admin;User:ops",
				 "allow.everyone.if.no.acl.found=true",
				 "acls.sync.interval.ms=5s" }));
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_STREQ("User:admin;User:ops", l->super_users);
	EXPECT_EQ(1, l->allow_everyone_if_no_acl_found);
	EXPECT_EQ(5000u, l->acls_sync_interval_ms);
	l = load(nullptr, with({ "authorizer.class.name=com.example.Mine" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
	EXPECT_NE(std::string::npos, l.err.find("authorizer.class.name")) << l.err;
	l = load(nullptr, with({ "acls.sync=maybe" }));
	EXPECT_EQ(KM_ECFGVALUE, l.rc);
}
