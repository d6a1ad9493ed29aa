/* Goal: addresses are parsed and reported as what they are (issue 21 item
 * 7). Host names and IPv4 literals are taken; an IPv6 literal, which
 * parses ([::1]:9092), is refused by name ("IPv6 is not supported yet")
 * in every address key rather than failing at start as "No route to host";
 * a name that does not resolve is KM_ERESOLVE with getaddrinfo's words,
 * never -EHOSTUNREACH.
 * Method: km_config_load over --set values, compared with the whole
 * message; common/resolve called directly with literals, "localhost" and
 * a name under .invalid (RFC 6761: never resolves, with or without DNS). */
#include <errno.h>

#include <gtest/gtest.h>

#include <string>

#include "common/errors.h"
#include "common/resolve.h"
#include "control/ctlproto.h"
#include "tests/config/config_util.h"

using namespace cfgtest;

namespace {

TEST(Addrs, HostNamesAndIpv4LiteralsAreTaken)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				  "source.bootstrap.servers=src-1.example.com:9092,10.0.0.7:9093",
				  "topics=t", "listeners=PLAINTEXT://127.0.0.1:0",
				  "advertised.listeners=mirror.example.com:19092" });
	ASSERT_EQ(0, l.rc) << l.err;
	ASSERT_EQ(2u, l->bootstrap_count);
	EXPECT_STREQ("src-1.example.com", l->bootstrap[0].host);
	EXPECT_EQ(9092, l->bootstrap[0].port);
	EXPECT_STREQ("10.0.0.7", l->bootstrap[1].host);
	EXPECT_STREQ("127.0.0.1", l->listener.host);
	EXPECT_EQ(0, l->listener.port);
	EXPECT_STREQ("mirror.example.com", l->advertised.host);
}

TEST(Addrs, Ipv6LiteralsAreRefusedByNameInEveryAddressKey)
{
	struct Case {
		std::string set, detail;
	} const cases[] = {
		{ "listeners=[::1]:0", "\"[::1]:0\": IPv6 is not supported yet (use an IPv4 address, 0.0.0.0 for all, or a host name)" },
		{ "listeners=PLAINTEXT://[::]:9092", "\"[::]:9092\": IPv6 is not supported yet (use an IPv4 address, 0.0.0.0 for all, or a host name)" },
		{ "source.bootstrap.servers=[fd00::1]:9092", "\"[fd00::1]:9092\": IPv6 is not supported yet (use an IPv4 address or a host name)" },
		{ "source.bootstrap.servers=h:1,[::1]:9092", "\"[::1]:9092\": IPv6 is not supported yet (use an IPv4 address or a host name)" },
		{ "advertised.listeners=[::1]:9092", "\"[::1]:9092\": IPv6 is not supported yet (use an IPv4 address or a host name)" },
		/* The syntax is still checked first, each form with its own words. */
		{ "source.bootstrap.servers=::1:9092", "\"::1:9092\": an IPv6 address needs brackets, e.g. [::1]:9092" },
		{ "source.bootstrap.servers=[::1]", "\"[::1]\": no port (expected host:port)" },
		{ "listeners=[::1:0", "\"[::1:0\": missing ']' after the IPv6 address" },
		{ "listeners=[1.2.3.4]:1", "\"[1.2.3.4]:1\": not an IPv6 address" },
		{ "source.bootstrap.servers=foo", "\"foo\": no port (expected host:port)" },
		{ "source.bootstrap.servers=foo:bar", "\"foo:bar\": port must be a number from 1 to 65535" },
	};
	for (const Case &c : cases) {
		Loaded l = load(nullptr, { "data.dir=/d", c.set });
		size_t eq = c.set.find('=');
		EXPECT_EQ(KM_ECFGVALUE, l.rc) << c.set;
		EXPECT_EQ("--set: " + c.set.substr(0, eq) + ": invalid value \"" +
				  c.set.substr(eq + 1) + "\": " + c.detail,
			  l.err);
	}
}

TEST(Addrs, ResolveNamesIpv6AndUnknownHostsForWhatTheyAre)
{
	char ip[64] = "", why[KM_RESOLVE_WHY_BYTES] = "";

	EXPECT_EQ(0, km_resolve_ipv4_why("127.0.0.1", ip, sizeof(ip), why,
					 sizeof(why)));
	EXPECT_STREQ("127.0.0.1", ip);
	EXPECT_EQ(0, km_resolve_ipv4("localhost", ip, sizeof(ip)));
	EXPECT_STREQ("127.0.0.1", ip);

	EXPECT_TRUE(km_resolve_is_ipv6("::1"));
	EXPECT_TRUE(km_resolve_is_ipv6("fd00::2"));
	EXPECT_FALSE(km_resolve_is_ipv6("[::1]"));
	EXPECT_FALSE(km_resolve_is_ipv6("10.0.0.1"));
	EXPECT_FALSE(km_resolve_is_ipv6("host"));
	EXPECT_EQ(-EAFNOSUPPORT,
		  km_resolve_ipv4_why("::1", ip, sizeof(ip), why, sizeof(why)));
	EXPECT_STREQ("'::1' is an IPv6 address: IPv6 is not supported yet", why);

	int rc = km_resolve_ipv4_why("no-such-host.invalid", ip, sizeof(ip),
				     why, sizeof(why));
	EXPECT_EQ(KM_ERESOLVE, rc);
	EXPECT_NE(-EHOSTUNREACH, rc);
	EXPECT_EQ(0u, std::string(why).rfind(
			      "cannot resolve host 'no-such-host.invalid': ", 0))
		<< why;
	EXPECT_GT(strlen(why), strlen("cannot resolve host 'no-such-host.invalid': "));
	EXPECT_STREQ("cannot resolve host name", km_strerror(KM_ERESOLVE));
}

/* The codes of issue 21 sit in the config block, clear of KM_ELAST, and
 * kmirrorctl names them (tests/ctl checks the whole range). */
TEST(Addrs, NewCodesAreNamedInRepliesAndExplained)
{
	EXPECT_EQ(-10086, KM_EDATADIRLOCK);
	EXPECT_EQ(-10088, KM_ERESOLVE);
	EXPECT_EQ(-10133, KM_ELAST);
	EXPECT_STREQ("KM_EDATADIRLOCK", km_ctlproto_error_name(KM_EDATADIRLOCK));
	EXPECT_STREQ("KM_ERESOLVE", km_ctlproto_error_name(KM_ERESOLVE));
	EXPECT_STREQ("data.dir is in use by another kmirrord (its .lock is held)",
		     km_strerror(KM_EDATADIRLOCK));
}

/* Issue 16: several listeners in Kafka's NAME://host:port form, each
 * with the protocol listener.security.protocol.map gives its name
 * (Kafka's default map without it), advertised by name; the primary
 * listener (listener/advertised) is the first PLAINTEXT one. */
TEST(Addrs, SeveralListenersTakeTheirProtocolAndAdvertisedAddressByName)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				  "listeners=SSL://127.0.0.1:9093,plaintext://:9092,"
				  "SASL_SSL://:9094,SASL_PLAINTEXT://:9095",
				  "advertised.listeners=SSL://tls.example.com:19093",
				  "ssl.certificate.location=/c.pem",
				  "ssl.key.location=/k.pem",
				  "sasl.users.file=/users" });
	ASSERT_EQ(0, l.rc) << l.err;
	ASSERT_EQ(4u, l->listeners_count);
	EXPECT_STREQ("SSL", l->listeners[0].name);
	EXPECT_EQ(1, l->listeners[0].protocol);
	EXPECT_STREQ("tls.example.com", l->listeners[0].advertised.host);
	EXPECT_EQ(19093, l->listeners[0].advertised.port);
	EXPECT_STREQ("PLAINTEXT", l->listeners[1].name);
	EXPECT_EQ(0, l->listeners[1].protocol);
	EXPECT_EQ(3, l->listeners[2].protocol);
	EXPECT_EQ(2, l->listeners[3].protocol);
	EXPECT_EQ(9094, l->listeners[2].advertised.port);
	/* The primary is the PLAINTEXT one, not the first. */
	EXPECT_EQ(9092, l->listener.port);
	EXPECT_EQ(9092, l->advertised.port);
}

TEST(Addrs, NamedListenersNeedTheProtocolMap)
{
	Loaded l = load(nullptr, { "data.dir=/d",
				  "listeners=INTERNAL://:9092,EXTERNAL://:9093",
				  "listener.security.protocol.map=INTERNAL:PLAINTEXT,"
				  "external:ssl",
				  "advertised.listeners=EXTERNAL://x.example.com:443",
				  "ssl.certificate.location=/c.pem",
				  "ssl.key.location=/k.pem" });
	ASSERT_EQ(0, l.rc) << l.err;
	EXPECT_EQ(0, l->listeners[0].protocol);
	EXPECT_EQ(1, l->listeners[1].protocol);
	EXPECT_STREQ("x.example.com", l->listeners[1].advertised.host);

	struct Case {
		std::vector<std::string> sets;
		std::string err;
	} const cases[] = {
		{ { "listeners=INTERNAL://:9092" },
		  "listeners: listener INTERNAL is not in listener.security.protocol.map" },
		{ { "listeners=PLAINTEXT://:9092",
		    "listener.security.protocol.map=X:SSL" },
		  "listeners: listener PLAINTEXT is not in listener.security.protocol.map" },
		{ { "listeners=PLAINTEXT://:9092",
		    "advertised.listeners=SSL://h:1" },
		  "advertised.listeners names SSL, which listeners does not" },
		{ { "listeners=SSL://:9093" },
		  "listener SSL (SSL) needs ssl.certificate.location" },
		{ { "listeners=SASL_SSL://:9093", "ssl.certificate.location=/c",
		    "ssl.key.location=/k", "ssl.client.auth=required" },
		  "listener SASL_SSL (SASL_SSL) needs ssl.ca.location (ssl.client.auth checks client certificates against it)" },
	};
	for (const Case &c : cases) {
		std::vector<std::string> sets = { "data.dir=/d" };

		sets.insert(sets.end(), c.sets.begin(), c.sets.end());
		Loaded b = load(nullptr, sets);
		EXPECT_EQ(KM_ECFGMISSING, b.rc) << c.sets[0];
		EXPECT_EQ(c.err, b.err) << c.sets[0];
	}
}

} // namespace
