/* Authorization with Kafka's ACL semantics (acl.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/km_assert.h"
#include "dataplane/serve/acl.h"

#define SUPERS_MAX 64u
#define WILDCARD "*"
#define WILDCARD_PRINCIPAL "User:*"

struct km_acl_table {
	uint32_t n;
	struct km_acl *acls;	/* sorted by (rtype, pattern, name, rest) */
	/* Lengths of the PREFIXED names present, per resource type: a check
	 * looks up only the prefixes of its name that some ACL has. */
	uint64_t prefix_lens[KM_ACL_RTYPES][KM_ACL_NAME_BYTES / 64];
	char supers[SUPERS_MAX][KM_ACL_PRINCIPAL_BYTES];
	uint32_t n_supers;
	bool allow_if_no_acl;
	struct km_acl_table *retired;	/* the store's list */
};

static bool rtype_ok(int v)
{
	return v >= KM_ACL_RES_TOPIC && v <= KM_ACL_RES_TXNID;
}

static bool op_ok(int v)
{
	return v >= KM_ACL_OP_ALL && v <= KM_ACL_OP_TWO_PHASE_COMMIT;
}

static int cmp_key(int rtype, int pattern, const char *name,
		   const struct km_acl *b)
{
	if (rtype != b->rtype)
		return rtype < b->rtype ? -1 : 1;
	if (pattern != b->pattern)
		return pattern < b->pattern ? -1 : 1;
	return strcmp(name, b->name);
}

static int cmp_acl(const void *x, const void *y)
{
	const struct km_acl *a = x, *b = y;
	int c = cmp_key(a->rtype, a->pattern, a->name, b);

	if (c == 0)
		c = strcmp(a->principal, b->principal);
	if (c == 0)
		c = strcmp(a->host, b->host);
	if (c == 0)
		c = (int)a->op - (int)b->op;
	if (c == 0)
		c = (int)a->perm - (int)b->perm;
	return c;
}

/* The first ACL whose key is not below (rtype, pattern, name). */
static uint32_t lower(const struct km_acl_table *t, int rtype, int pattern,
		      const char *name)
{
	uint32_t lo = 0, hi = t->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp_key(rtype, pattern, name, &t->acls[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void parse_supers(struct km_acl_table *t, const char *s)
{
	while (s != NULL && *s != '\0' && t->n_supers < SUPERS_MAX) {
		const char *end = strchr(s, ';');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		while (len > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			len--;
		}
		while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
			len--;
		if (len > 0 && len < KM_ACL_PRINCIPAL_BYTES) {
			memcpy(t->supers[t->n_supers], s, len);
			t->supers[t->n_supers++][len] = '\0';
		}
		s = end ? end + 1 : NULL;
	}
}

static bool acl_ok(const struct km_acl *a)
{
	return rtype_ok(a->rtype) && op_ok(a->op) &&
	       (a->pattern == KM_ACL_LITERAL || a->pattern == KM_ACL_PREFIXED) &&
	       (a->perm == KM_ACL_ALLOW || a->perm == KM_ACL_DENY) &&
	       memchr(a->name, '\0', sizeof(a->name)) != NULL &&
	       memchr(a->principal, '\0', sizeof(a->principal)) != NULL &&
	       memchr(a->host, '\0', sizeof(a->host)) != NULL;
}

int km_acl_table_build(const struct km_acl *acls, uint32_t n,
		       const char *super_users, bool allow_if_no_acl,
		       struct km_acl_table **out)
{
	struct km_acl_table *t = calloc(1, sizeof(*t));
	uint32_t k = 0;

	if (t == NULL || (t->acls = calloc(n ? n : 1, sizeof(*acls))) == NULL) {
		free(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!acl_ok(&acls[i])) {
			km_acl_table_free(t);
			return -EINVAL;
		}
	if (n > 0) /* acls may be NULL for none */
		memcpy(t->acls, acls, sizeof(*acls) * n);
	qsort(t->acls, n, sizeof(*acls), cmp_acl);
	/* The same ACL from the file and the source is one. */
	for (uint32_t i = 0; i < n; i++)
		if (k == 0 || cmp_acl(&t->acls[k - 1], &t->acls[i]) != 0)
			t->acls[k++] = t->acls[i];
	t->n = k;
	for (uint32_t i = 0; i < k; i++) {
		const struct km_acl *a = &t->acls[i];
		size_t len = strlen(a->name);

		if (a->pattern == KM_ACL_PREFIXED)
			t->prefix_lens[a->rtype - 2][len / 64] |= 1ull << (len % 64);
	}
	parse_supers(t, super_users);
	t->allow_if_no_acl = allow_if_no_acl;
	*out = t;
	return 0;
}

void km_acl_table_free(struct km_acl_table *t)
{
	if (t == NULL)
		return;
	free(t->acls);
	free(t);
}

uint32_t km_acl_table_count(const struct km_acl_table *t)
{
	return t != NULL ? t->n : 0;
}

uint32_t km_acl_table_count_from(const struct km_acl_table *t,
				 enum km_acl_origin origin)
{
	uint32_t n = 0;

	for (uint32_t i = 0; t != NULL && i < t->n; i++)
		n += t->acls[i].origin == origin;
	return n;
}

const struct km_acl *km_acl_table_at(const struct km_acl_table *t, uint32_t i)
{
	KM_ASSERT(i < t->n);
	return &t->acls[i];
}

/* ---- the check ------------------------------------------------------------- */

static bool is_super(const struct km_acl_table *t, const char *principal)
{
	for (uint32_t i = 0; i < t->n_supers; i++)
		if (strcmp(t->supers[i], principal) == 0)
			return true;
	return false;
}

struct req {
	const char *principal;
	const char *host;
	enum km_acl_op op;
};

/* Does an ALLOW of acl_op grant op? (StandardAuthorizerData.findResult:
 * "ACLs for various operations (READ, WRITE, DELETE, ALTER) imply the
 * presence of DESCRIBE ... But this rule only applies to ALLOW ACLs.") */
static bool allow_grants(int acl_op, enum km_acl_op op)
{
	if (acl_op == KM_ACL_OP_ALL || acl_op == (int)op)
		return true;
	if (op == KM_ACL_OP_DESCRIBE)
		return acl_op == KM_ACL_OP_READ || acl_op == KM_ACL_OP_WRITE ||
		       acl_op == KM_ACL_OP_DELETE || acl_op == KM_ACL_OP_ALTER;
	if (op == KM_ACL_OP_DESCRIBE_CONFIGS)
		return acl_op == KM_ACL_OP_ALTER_CONFIGS;
	return false;
}

/* 0: does not apply to the request; else the ACL's permission. */
static int applies(const struct km_acl *a, const struct req *q)
{
	if (strcmp(a->principal, q->principal) != 0 &&
	    strcmp(a->principal, WILDCARD_PRINCIPAL) != 0)
		return 0;
	if (strcmp(a->host, WILDCARD) != 0 && strcmp(a->host, q->host) != 0)
		return 0;
	if (a->perm == KM_ACL_ALLOW)
		return allow_grants(a->op, q->op) ? KM_ACL_ALLOW : 0;
	return a->op == KM_ACL_OP_ALL || a->op == q->op ? KM_ACL_DENY : 0;
}

struct verdict {
	bool any;	/* some ACL names the resource (hasResourceAcls) */
	bool allow;
	bool deny;
};

/* The ACLs keyed exactly (rtype, pattern, name). */
static void scan(const struct km_acl_table *t, int rtype, int pattern,
		 const char *name, const struct req *q, struct verdict *v)
{
	for (uint32_t i = lower(t, rtype, pattern, name);
	     i < t->n && !v->deny &&
	     cmp_key(rtype, pattern, name, &t->acls[i]) == 0;
	     i++) {
		int p = applies(&t->acls[i], q);

		v->any = true;
		v->allow |= p == KM_ACL_ALLOW;
		v->deny |= p == KM_ACL_DENY;
	}
}

static void scan_prefixes(const struct km_acl_table *t, int rtype,
			  const char *name, const struct req *q,
			  struct verdict *v)
{
	const uint64_t *lens = t->prefix_lens[rtype - 2];
	char buf[KM_ACL_NAME_BYTES];
	size_t n = strlen(name);

	for (size_t len = 1; len <= n && len < KM_ACL_NAME_BYTES && !v->deny;
	     len++) {
		if (!(lens[len / 64] & (1ull << (len % 64))))
			continue;
		memcpy(buf, name, len);
		buf[len] = '\0';
		scan(t, rtype, KM_ACL_PREFIXED, buf, q, v);
	}
}

bool km_acl_authorize(const struct km_acl_table *t, const char *principal,
		      const char *host, enum km_acl_op op,
		      enum km_acl_rtype rtype, const char *name)
{
	struct req q = { principal, host, op };
	struct verdict v = { false, false, false };

	if (t == NULL)
		return true;
	KM_ASSERT(rtype_ok(rtype));
	if (is_super(t, principal))
		return true;
	scan(t, rtype, KM_ACL_LITERAL, name, &q, &v);
	scan_prefixes(t, rtype, name, &q, &v);
	if (strcmp(name, WILDCARD) != 0)
		scan(t, rtype, KM_ACL_LITERAL, WILDCARD, &q, &v);
	if (v.deny)
		return false;
	if (v.allow)
		return true;
	return !v.any && t->allow_if_no_acl;
}

/* authorizeByResourceType's match: the operation itself or All, for a
 * DENY as for an ALLOW (no implied operations there). */
static bool applies_any(const struct km_acl *a, const struct req *q)
{
	return (strcmp(a->principal, q->principal) == 0 ||
		strcmp(a->principal, WILDCARD_PRINCIPAL) == 0) &&
	       (strcmp(a->host, WILDCARD) == 0 || strcmp(a->host, q->host) == 0) &&
	       (a->op == KM_ACL_OP_ALL || a->op == q->op);
}

/* A DENY that applies on a pattern that covers the ALLOW a (Kafka: the
 * same literal name, or a prefixed name that starts a's name). */
static bool shadowed(const struct km_acl_table *t, uint32_t lo, uint32_t hi,
		     const struct km_acl *a, const struct req *q)
{
	for (uint32_t i = lo; i < hi; i++) {
		const struct km_acl *d = &t->acls[i];

		if (d->perm != KM_ACL_DENY || !applies_any(d, q))
			continue;
		if (d->pattern == KM_ACL_LITERAL && a->pattern == KM_ACL_LITERAL &&
		    strcmp(d->name, a->name) == 0)
			return true;
		if (d->pattern == KM_ACL_PREFIXED &&
		    strncmp(a->name, d->name, strlen(d->name)) == 0)
			return true;
	}
	return false;
}

bool km_acl_authorize_any(const struct km_acl_table *t, const char *principal,
			  const char *host, enum km_acl_op op,
			  enum km_acl_rtype rtype)
{
	struct req q = { principal, host, op };
	uint32_t lo, hi;
	bool wild_allow = false;

	if (t == NULL ||
	    km_acl_authorize(t, principal, host, op, rtype, "hardcode"))
		return true;
	lo = lower(t, rtype, 0, "");
	hi = lower(t, rtype + 1, 0, "");
	for (uint32_t i = lo; i < hi; i++) {
		const struct km_acl *a = &t->acls[i];
		bool wild = a->pattern == KM_ACL_LITERAL &&
			    strcmp(a->name, WILDCARD) == 0;

		if (!applies_any(a, &q))
			continue;
		if (wild && a->perm == KM_ACL_DENY)
			return false;
		wild_allow |= wild && a->perm == KM_ACL_ALLOW;
	}
	if (wild_allow)
		return true;
	for (uint32_t i = lo; i < hi; i++)
		if (t->acls[i].perm == KM_ACL_ALLOW &&
		    applies_any(&t->acls[i], &q) &&
		    !shadowed(t, lo, hi, &t->acls[i], &q))
			return true;
	return false;
}

/* ---- the store --------------------------------------------------------------- */

struct km_acl_store {
	_Atomic(struct km_acl_table *) cur;
	struct km_acl_table *retired;		/* control thread's */
	_Atomic uint64_t denied[KM_ACL_RTYPES];	/* per km_acl_rtype - 2 */
};

const struct km_acl_table *km_acl_store_get(struct km_acl_store *s)
{
	return atomic_load_explicit(&s->cur, memory_order_acquire);
}

uint64_t km_acl_store_denied(struct km_acl_store *s, enum km_acl_rtype rtype)
{
	return atomic_load_explicit(&s->denied[rtype - 2], memory_order_relaxed);
}

int km_acl_store_new(struct km_acl_table *t, struct km_acl_store **out)
{
	struct km_acl_store *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return -ENOMEM;
	atomic_init(&s->cur, t);
	*out = s;
	return 0;
}

void km_acl_store_publish(struct km_acl_store *s, struct km_acl_table *t)
{
	struct km_acl_table *old =
		atomic_load_explicit(&s->cur, memory_order_relaxed);

	/* A worker may be reading old: it stays until the store goes. */
	if (old != NULL) {
		old->retired = s->retired;
		s->retired = old;
	}
	atomic_store_explicit(&s->cur, t, memory_order_release);
}

void km_acl_store_free(struct km_acl_store *s)
{
	if (s == NULL)
		return;
	km_acl_table_free(atomic_load_explicit(&s->cur, memory_order_relaxed));
	while (s->retired != NULL) {
		struct km_acl_table *next = s->retired->retired;

		km_acl_table_free(s->retired);
		s->retired = next;
	}
	free(s);
}

bool km_acl_store_authorize(struct km_acl_store *s, const char *principal,
			    const char *host, enum km_acl_op op,
			    enum km_acl_rtype rtype, const char *name)
{
	bool ok = km_acl_authorize(km_acl_store_get(s), principal, host, op,
				   rtype, name);

	if (!ok)
		atomic_fetch_add_explicit(&s->denied[rtype - 2], 1,
					  memory_order_relaxed);
	return ok;
}

bool km_acl_store_authorize_any(struct km_acl_store *s, const char *principal,
				const char *host, enum km_acl_op op,
				enum km_acl_rtype rtype)
{
	bool ok = km_acl_authorize_any(km_acl_store_get(s), principal, host,
				       op, rtype);

	if (!ok)
		atomic_fetch_add_explicit(&s->denied[rtype - 2], 1,
					  memory_order_relaxed);
	return ok;
}

/* ---- text ------------------------------------------------------------------- */

static const char *const rtype_names[] = { "Topic", "Group", "Cluster",
					   "TransactionalId" };
static const char *const op_names[] = {
	"All", "Read", "Write", "Create", "Delete", "Alter", "Describe",
	"ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
	"CreateTokens", "DescribeTokens", "TwoPhaseCommit",
};

const char *km_acl_rtype_name(int rtype)
{
	return rtype_ok(rtype) ? rtype_names[rtype - 2] : "?";
}

const char *km_acl_op_name(int op)
{
	return op_ok(op) ? op_names[op - 2] : "?";
}

const char *km_acl_pattern_name(int pattern)
{
	return pattern == KM_ACL_LITERAL    ? "Literal"
	       : pattern == KM_ACL_PREFIXED ? "Prefixed"
					    : "?";
}

const char *km_acl_perm_name(int perm)
{
	return perm == KM_ACL_ALLOW ? "Allow" : perm == KM_ACL_DENY ? "Deny" : "?";
}

/* The file's words for resource types: kafka-acls' option names. */
static int parse_rtype(const char *w)
{
	static const char *const words[] = { "TOPIC", "GROUP", "CLUSTER",
					     "TRANSACTIONAL_ID" };

	for (int i = 0; i < KM_ACL_RTYPES; i++)
		if (strcasecmp(w, words[i]) == 0 ||
		    strcasecmp(w, rtype_names[i]) == 0)
			return i + 2;
	return -1;
}

static int parse_op(const char *w)
{
	for (int i = 0; i < (int)(sizeof(op_names) / sizeof(op_names[0])); i++)
		if (strcasecmp(w, op_names[i]) == 0)
			return i + 2;
	return -1;
}

struct words {
	char w[8][KM_ACL_PRINCIPAL_BYTES];
	int n;
};

/* Split at blanks; a '#' starts a comment. @return -1: too many/long. */
static int split(const char *line, struct words *ws)
{
	const char *p = line;

	ws->n = 0;
	for (;;) {
		size_t len;

		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (*p == '\0' || *p == '#')
			return 0;
		len = strcspn(p, " \t\r\n");
		if (ws->n == 8 || len >= KM_ACL_PRINCIPAL_BYTES)
			return -1;
		memcpy(ws->w[ws->n], p, len);
		ws->w[ws->n++][len] = '\0';
		p += len;
	}
}

static int bad(char *why, size_t cap, const char *fmt, const char *word)
{
	snprintf(why, cap, fmt, word);
	return -EINVAL;
}

static int parse_pattern_and_name(struct words *ws, int k, struct km_acl *out,
				  char *why, size_t cap)
{
	out->pattern = KM_ACL_LITERAL;
	if (k < ws->n && strcasecmp(ws->w[k], "PREFIXED") == 0) {
		out->pattern = KM_ACL_PREFIXED;
		k++;
	} else if (k < ws->n && strcasecmp(ws->w[k], "LITERAL") == 0) {
		k++;
	}
	if (k >= ws->n)
		return bad(why, cap, "no resource name after the type%s", "");
	if (strlen(ws->w[k]) >= KM_ACL_NAME_BYTES)
		return bad(why, cap, "resource name longer than 255 bytes%s", "");
	snprintf(out->name, sizeof(out->name), "%s", ws->w[k++]);
	if (k < ws->n && strncasecmp(ws->w[k], "host=", 5) == 0) {
		if (strlen(ws->w[k] + 5) == 0 ||
		    strlen(ws->w[k] + 5) >= KM_ACL_HOST_BYTES)
			return bad(why, cap, "bad host '%s'", ws->w[k] + 5);
		snprintf(out->host, sizeof(out->host), "%s", ws->w[k++] + 5);
	}
	if (k < ws->n)
		return bad(why, cap, "unexpected '%s' after the resource",
			   ws->w[k]);
	if (out->rtype == KM_ACL_RES_CLUSTER &&
	    strcmp(out->name, KM_ACL_CLUSTER_NAME) != 0)
		return bad(why, cap, "the CLUSTER resource is named "
			   KM_ACL_CLUSTER_NAME ", not '%s'", out->name);
	return 1;
}

int km_acl_parse_line(const char *line, struct km_acl *out, char *why,
		      size_t why_cap)
{
	struct words ws;
	int v;

	memset(out, 0, sizeof(*out));
	snprintf(out->host, sizeof(out->host), WILDCARD);
	if (split(line, &ws) < 0)
		return bad(why, why_cap, "too many or too long words%s", "");
	if (ws.n == 0)
		return 0;
	if (ws.n < 5)
		return bad(why, why_cap, "expected PRINCIPAL ALLOW|DENY OPERATION "
			   "TYPE [LITERAL|PREFIXED] NAME [host=HOST]%s", "");
	if (strncmp(ws.w[0], "User:", 5) != 0 || ws.w[0][5] == '\0')
		return bad(why, why_cap, "principal '%s' is not User:NAME",
			   ws.w[0]);
	snprintf(out->principal, sizeof(out->principal), "%s", ws.w[0]);
	if (strcasecmp(ws.w[1], "ALLOW") == 0)
		out->perm = KM_ACL_ALLOW;
	else if (strcasecmp(ws.w[1], "DENY") == 0)
		out->perm = KM_ACL_DENY;
	else
		return bad(why, why_cap, "'%s' is not ALLOW or DENY", ws.w[1]);
	if ((v = parse_op(ws.w[2])) < 0)
		return bad(why, why_cap, "unknown operation '%s'", ws.w[2]);
	out->op = (uint8_t)v;
	if ((v = parse_rtype(ws.w[3])) < 0)
		return bad(why, why_cap, "unknown resource type '%s' (TOPIC, "
			   "GROUP, CLUSTER, TRANSACTIONAL_ID)", ws.w[3]);
	out->rtype = (uint8_t)v;
	return parse_pattern_and_name(&ws, 4, out, why, why_cap);
}

void km_acl_format(const struct km_acl *a, char *out, size_t cap)
{
	static const char *const words[] = { "TOPIC", "GROUP", "CLUSTER",
					     "TRANSACTIONAL_ID" };

	snprintf(out, cap, "%s %s %s %s %s %s host=%s", a->principal,
		 a->perm == KM_ACL_ALLOW ? "ALLOW" : "DENY", km_acl_op_name(a->op),
		 rtype_ok(a->rtype) ? words[a->rtype - 2] : "?",
		 a->pattern == KM_ACL_PREFIXED ? "PREFIXED" : "LITERAL", a->name,
		 a->host);
}
