// Goal: the ACL matcher (dataplane/serve/acl.h) answers as Kafka's
// StandardAuthorizer does, and acls.file's lines read as documented.
// Method: tables built from a few ACLs each, one per rule of
// StandardAuthorizerData.authorize/findResult (DENY wins across literal,
// prefixed and wildcard patterns; ALLOW of Read/Write/Delete/Alter implies
// Describe, a DENY implies nothing; super.users; User:*; hosts;
// allow.everyone.if.no.acl.found both ways, which only counts when no ACL
// at all names the resource) and of Authorizer.authorizeByResourceType;
// then thousands of random ACLs against a naive scan of every ACL written
// from the same rules, so the sorted index and the prefix-length bitmap
// can skip nothing that applies.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "dataplane/serve/acl.h"
}

namespace {

km_acl Acl(const char *principal, km_acl_perm perm, km_acl_op op,
	   km_acl_rtype rt, km_acl_pattern pat, const char *name,
	   const char *host = "*")
{
	km_acl a;
	memset(&a, 0, sizeof(a));
	snprintf(a.principal, sizeof(a.principal), "%s", principal);
	snprintf(a.host, sizeof(a.host), "%s", host);
	snprintf(a.name, sizeof(a.name), "%s", name);
	a.rtype = rt;
	a.pattern = pat;
	a.op = op;
	a.perm = perm;
	return a;
}

struct Table {
	km_acl_table *t = nullptr;
	Table(const std::vector<km_acl> &v, const char *supers = nullptr,
	      bool allow_if_none = false)
	{
		EXPECT_EQ(0, km_acl_table_build(v.data(), (uint32_t)v.size(),
						supers, allow_if_none, &t));
	}
	~Table() { km_acl_table_free(t); }
	bool Ok(const char *who, km_acl_op op, km_acl_rtype rt,
		const char *name, const char *host = "127.0.0.1") const
	{
		return km_acl_authorize(t, who, host, op, rt, name);
	}
};

const km_acl_rtype TOPIC = KM_ACL_RES_TOPIC;
const km_acl_rtype GROUP = KM_ACL_RES_GROUP;

TEST(Acl, NoAclFoundFollowsTheSetting)
{
	Table off({}, nullptr, false), on({}, nullptr, true);

	EXPECT_FALSE(off.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "t"));
	EXPECT_TRUE(on.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "t"));
	// An ACL for someone else names the resource: no longer "no ACL".
	Table other({ Acl("User:bob", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
			  KM_ACL_LITERAL, "t") },
		    nullptr, true);
	EXPECT_FALSE(other.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "t"));
	EXPECT_TRUE(other.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "u"));
	// ... even one whose operation does not match (hasResourceAcls).
	EXPECT_FALSE(other.Ok("User:bob", KM_ACL_OP_WRITE, TOPIC, "t"));
}

TEST(Acl, LiteralAllowAndImpliedDescribe)
{
	Table t({ Acl("User:alice", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_LITERAL, "orders"),
		  Acl("User:carol", KM_ACL_ALLOW, KM_ACL_OP_ALTER_CONFIGS, TOPIC,
		      KM_ACL_LITERAL, "orders") });

	EXPECT_TRUE(t.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "orders"));
	EXPECT_TRUE(t.Ok("User:alice", KM_ACL_OP_DESCRIBE, TOPIC, "orders"));
	EXPECT_FALSE(t.Ok("User:alice", KM_ACL_OP_WRITE, TOPIC, "orders"));
	EXPECT_FALSE(t.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "orders2"));
	EXPECT_FALSE(t.Ok("User:alice", KM_ACL_OP_READ, GROUP, "orders"));
	EXPECT_FALSE(t.Ok("User:bob", KM_ACL_OP_READ, TOPIC, "orders"));
	EXPECT_TRUE(t.Ok("User:carol", KM_ACL_OP_DESCRIBE_CONFIGS, TOPIC, "orders"));
	EXPECT_FALSE(t.Ok("User:carol", KM_ACL_OP_DESCRIBE, TOPIC, "orders"));
	for (km_acl_op op : { KM_ACL_OP_WRITE, KM_ACL_OP_DELETE, KM_ACL_OP_ALTER }) {
		Table w({ Acl("User:x", KM_ACL_ALLOW, op, TOPIC, KM_ACL_LITERAL, "t") });
		EXPECT_TRUE(w.Ok("User:x", KM_ACL_OP_DESCRIBE, TOPIC, "t")) << op;
		EXPECT_FALSE(w.Ok("User:x", KM_ACL_OP_READ, TOPIC, "t")) << op;
	}
	Table c({ Acl("User:x", KM_ACL_ALLOW, KM_ACL_OP_CREATE, TOPIC,
		      KM_ACL_LITERAL, "t") });
	EXPECT_FALSE(c.Ok("User:x", KM_ACL_OP_DESCRIBE, TOPIC, "t"));
}

TEST(Acl, DenyWinsAcrossLiteralPrefixedAndWildcard)
{
	Table a({ Acl("User:alice", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_PREFIXED, "ord"),
		  Acl("User:alice", KM_ACL_DENY, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_LITERAL, "orders") });
	EXPECT_FALSE(a.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "orders"));
	EXPECT_TRUE(a.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "ordx"));

	Table b({ Acl("User:alice", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_LITERAL, "orders"),
		  Acl("User:*", KM_ACL_DENY, KM_ACL_OP_ALL, TOPIC,
		      KM_ACL_PREFIXED, "or") });
	EXPECT_FALSE(b.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "orders"));
	EXPECT_FALSE(b.Ok("User:alice", KM_ACL_OP_DESCRIBE, TOPIC, "orders"));

	Table c({ Acl("User:alice", KM_ACL_ALLOW, KM_ACL_OP_ALL, TOPIC,
		      KM_ACL_PREFIXED, "orders"),
		  Acl("User:alice", KM_ACL_DENY, KM_ACL_OP_WRITE, TOPIC,
		      KM_ACL_LITERAL, "*") });
	EXPECT_FALSE(c.Ok("User:alice", KM_ACL_OP_WRITE, TOPIC, "orders-1"));
	EXPECT_TRUE(c.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "orders-1"));

	// A DENY of Read does not deny Describe (implication is ALLOW-only).
	Table d({ Acl("User:alice", KM_ACL_ALLOW, KM_ACL_OP_ALL, TOPIC,
		      KM_ACL_LITERAL, "t"),
		  Acl("User:alice", KM_ACL_DENY, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_LITERAL, "t") });
	EXPECT_FALSE(d.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "t"));
	EXPECT_TRUE(d.Ok("User:alice", KM_ACL_OP_DESCRIBE, TOPIC, "t"));
}

TEST(Acl, WildcardPatternPrincipalAndHost)
{
	Table t({ Acl("User:*", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_LITERAL, "*"),
		  Acl("User:bob", KM_ACL_ALLOW, KM_ACL_OP_WRITE, TOPIC,
		      KM_ACL_LITERAL, "logs", "10.0.0.7") });

	EXPECT_TRUE(t.Ok("User:anyone", KM_ACL_OP_READ, TOPIC, "x"));
	EXPECT_TRUE(t.Ok("User:ANONYMOUS", KM_ACL_OP_DESCRIBE, TOPIC, "y"));
	EXPECT_FALSE(t.Ok("User:anyone", KM_ACL_OP_WRITE, TOPIC, "x"));
	EXPECT_FALSE(t.Ok("User:anyone", KM_ACL_OP_READ, GROUP, "x"));
	EXPECT_TRUE(t.Ok("User:bob", KM_ACL_OP_WRITE, TOPIC, "logs", "10.0.0.7"));
	EXPECT_FALSE(t.Ok("User:bob", KM_ACL_OP_WRITE, TOPIC, "logs", "10.0.0.8"));
	// A prefixed "*" is a prefix, not a wildcard.
	Table p({ Acl("User:*", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
		      KM_ACL_PREFIXED, "*") });
	EXPECT_FALSE(p.Ok("User:x", KM_ACL_OP_READ, TOPIC, "orders"));
	EXPECT_TRUE(p.Ok("User:x", KM_ACL_OP_READ, TOPIC, "*orders"));
}

TEST(Acl, SuperUsersPassEverything)
{
	Table t({ Acl("User:*", KM_ACL_DENY, KM_ACL_OP_ALL, TOPIC,
		      KM_ACL_LITERAL, "*") },
		" User:admin ; User:ops;User:*");

	EXPECT_TRUE(t.Ok("User:admin", KM_ACL_OP_WRITE, TOPIC, "t"));
	EXPECT_TRUE(t.Ok("User:ops", KM_ACL_OP_READ, GROUP, "g"));
	// Kafka compares the principal's text: "User:*" in super.users is
	// nobody's.
	EXPECT_FALSE(t.Ok("User:alice", KM_ACL_OP_READ, TOPIC, "t"));
	EXPECT_FALSE(t.Ok("User:admins", KM_ACL_OP_READ, TOPIC, "t"));
}

TEST(Acl, AuthorizeByResourceType)
{
	auto any = [](const std::vector<km_acl> &v, bool none = false) {
		km_acl_table *t;
		EXPECT_EQ(0, km_acl_table_build(v.data(), (uint32_t)v.size(),
						"User:admin", none, &t));
		bool r = km_acl_authorize_any(t, "User:p", "127.0.0.1",
					      KM_ACL_OP_WRITE, TOPIC);
		km_acl_table_free(t);
		return r;
	};
	km_acl allow = Acl("User:p", KM_ACL_ALLOW, KM_ACL_OP_WRITE, TOPIC,
			   KM_ACL_PREFIXED, "logs-");
	EXPECT_FALSE(any({}));
	EXPECT_TRUE(any({}, true)); // "hardcode" has no ACL
	EXPECT_TRUE(any({ allow }));
	EXPECT_FALSE(any({ allow, Acl("User:p", KM_ACL_DENY, KM_ACL_OP_WRITE,
				      TOPIC, KM_ACL_PREFIXED, "log") }));
	EXPECT_TRUE(any({ allow, Acl("User:p", KM_ACL_DENY, KM_ACL_OP_WRITE,
				     TOPIC, KM_ACL_LITERAL, "logs-") }));
	EXPECT_FALSE(any({ allow, Acl("User:*", KM_ACL_DENY, KM_ACL_OP_ALL,
				      TOPIC, KM_ACL_LITERAL, "*") }));
	EXPECT_FALSE(any({ Acl("User:p", KM_ACL_ALLOW, KM_ACL_OP_READ, TOPIC,
			       KM_ACL_LITERAL, "t") }));
	EXPECT_TRUE(any({ Acl("User:*", KM_ACL_ALLOW, KM_ACL_OP_ALL, TOPIC,
			      KM_ACL_LITERAL, "*") }));
}

TEST(Acl, ParseLines)
{
	km_acl a;
	char why[256], text[1024];

	ASSERT_EQ(1, km_acl_parse_line("User:alice ALLOW Read TOPIC PREFIXED "
				       "orders- host=*\n", &a, why, sizeof(why)));
	EXPECT_STREQ("User:alice", a.principal);
	EXPECT_EQ(KM_ACL_ALLOW, a.perm);
	EXPECT_EQ(KM_ACL_OP_READ, a.op);
	EXPECT_EQ(KM_ACL_RES_TOPIC, a.rtype);
	EXPECT_EQ(KM_ACL_PREFIXED, a.pattern);
	EXPECT_STREQ("orders-", a.name);
	EXPECT_STREQ("*", a.host);
	km_acl_format(&a, text, sizeof(text));
	EXPECT_STREQ("User:alice ALLOW Read TOPIC PREFIXED orders- host=*", text);

	ASSERT_EQ(1, km_acl_parse_line("  User:b deny idempotentwrite cluster "
				       "kafka-cluster host=10.1.2.3 # why", &a,
				       why, sizeof(why)));
	EXPECT_EQ(KM_ACL_DENY, a.perm);
	EXPECT_EQ(KM_ACL_OP_IDEMPOTENT_WRITE, a.op);
	EXPECT_EQ(KM_ACL_LITERAL, a.pattern);
	EXPECT_STREQ("10.1.2.3", a.host);
	ASSERT_EQ(1, km_acl_parse_line("User:t ALLOW Write TRANSACTIONAL_ID app-1",
				       &a, why, sizeof(why)));
	EXPECT_EQ(KM_ACL_RES_TXNID, a.rtype);

	EXPECT_EQ(0, km_acl_parse_line("# comment", &a, why, sizeof(why)));
	EXPECT_EQ(0, km_acl_parse_line("   \n", &a, why, sizeof(why)));
	struct {
		const char *line, *says;
	} bad[] = {
		{ "alice ALLOW Read TOPIC t", "not User:NAME" },
		{ "User:a PERMIT Read TOPIC t", "'PERMIT' is not ALLOW or DENY" },
		{ "User:a ALLOW Fly TOPIC t", "unknown operation 'Fly'" },
		{ "User:a ALLOW Read TABLE t", "unknown resource type 'TABLE'" },
		{ "User:a ALLOW Read TOPIC PREFIXED", "no resource name" },
		{ "User:a ALLOW Read TOPIC t extra", "unexpected 'extra'" },
		{ "User:a ALLOW Read CLUSTER c", "named kafka-cluster" },
		{ "User:a ALLOW Read", "expected PRINCIPAL" },
	};
	for (auto &b : bad) {
		EXPECT_EQ(-EINVAL, km_acl_parse_line(b.line, &a, why, sizeof(why)))
			<< b.line;
		EXPECT_NE(nullptr, strstr(why, b.says)) << b.line << ": " << why;
	}
}

TEST(Acl, StoreCountsDenialsPerType)
{
	std::vector<km_acl> v = { Acl("User:a", KM_ACL_ALLOW, KM_ACL_OP_READ,
				      GROUP, KM_ACL_LITERAL, "g") };
	km_acl_table *t, *t2;
	km_acl_store *s;

	ASSERT_EQ(0, km_acl_table_build(v.data(), 1, nullptr, false, &t));
	ASSERT_EQ(0, km_acl_store_new(t, &s));
	EXPECT_TRUE(km_acl_store_authorize(s, "User:a", "h", KM_ACL_OP_READ,
					   GROUP, "g"));
	EXPECT_FALSE(km_acl_store_authorize(s, "User:a", "h", KM_ACL_OP_READ,
					    TOPIC, "g"));
	EXPECT_FALSE(km_acl_store_authorize(s, "User:b", "h", KM_ACL_OP_READ,
					    GROUP, "g"));
	EXPECT_EQ(1u, km_acl_store_denied(s, TOPIC));
	EXPECT_EQ(1u, km_acl_store_denied(s, GROUP));
	// A new table answers from the publish on.
	ASSERT_EQ(0, km_acl_table_build(nullptr, 0, "User:b", false, &t2));
	km_acl_store_publish(s, t2);
	EXPECT_TRUE(km_acl_store_authorize(s, "User:b", "h", KM_ACL_OP_READ,
					   GROUP, "g"));
	EXPECT_FALSE(km_acl_store_authorize(s, "User:a", "h", KM_ACL_OP_READ,
					    GROUP, "g"));
	km_acl_store_free(s);
}

// The same rules, written as a scan of every ACL (StandardAuthorizerData).
bool Naive(const std::vector<km_acl> &v, const std::string &who,
	   const std::string &host, km_acl_op op, km_acl_rtype rt,
	   const std::string &name, bool allow_if_none)
{
	bool any = false, allow = false;
	for (const km_acl &a : v) {
		if (a.rtype != rt)
			continue;
		std::string n = a.name;
		bool match = a.pattern == KM_ACL_LITERAL
				     ? (n == name || n == "*")
				     : name.compare(0, n.size(), n) == 0;
		if (!match)
			continue;
		any = true;
		if (who != a.principal && std::string("User:*") != a.principal)
			continue;
		if (std::string("*") != a.host && host != a.host)
			continue;
		bool opok = a.op == KM_ACL_OP_ALL || a.op == op;
		if (a.perm == KM_ACL_ALLOW && op == KM_ACL_OP_DESCRIBE)
			opok |= a.op == KM_ACL_OP_READ || a.op == KM_ACL_OP_WRITE ||
				a.op == KM_ACL_OP_DELETE || a.op == KM_ACL_OP_ALTER;
		if (!opok)
			continue;
		if (a.perm == KM_ACL_DENY)
			return false;
		allow = true;
	}
	return allow || (!any && allow_if_none);
}

TEST(Acl, IndexAgreesWithAScanOfEveryAcl)
{
	std::mt19937 rng(1234);
	const char *names[] = { "o", "or", "ord", "orders", "orders-1",
				"orders-10", "p", "pay", "payments", "*", "x" };
	const char *who[] = { "User:a", "User:b", "User:*" };
	const km_acl_op ops[] = { KM_ACL_OP_ALL, KM_ACL_OP_READ, KM_ACL_OP_WRITE,
				  KM_ACL_OP_DESCRIBE };
	for (int round = 0; round < 50; round++) {
		std::vector<km_acl> v;
		int n = 1 + (int)(rng() % 200);
		for (int i = 0; i < n; i++)
			v.push_back(Acl(who[rng() % 3],
					rng() % 4 ? KM_ACL_ALLOW : KM_ACL_DENY,
					ops[rng() % 4],
					rng() % 2 ? TOPIC : GROUP,
					rng() % 2 ? KM_ACL_LITERAL : KM_ACL_PREFIXED,
					names[rng() % 11], rng() % 5 ? "*" : "1.1.1.1"));
		bool none = rng() % 2;
		Table t(v, nullptr, none);
		for (const char *nm : names)
			for (const char *w : { "User:a", "User:b", "User:c" })
				for (km_acl_op op : { KM_ACL_OP_READ, KM_ACL_OP_WRITE,
						      KM_ACL_OP_DESCRIBE })
					for (km_acl_rtype rt : { TOPIC, GROUP })
						ASSERT_EQ(Naive(v, w, "1.1.1.1", op, rt, nm, none),
							  t.Ok(w, op, rt, nm, "1.1.1.1"))
							<< "round " << round << " " << w
							<< " op " << op << " " << nm;
	}
}

} // namespace
