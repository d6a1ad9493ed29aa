/* Authorization with Kafka's ACL semantics (issue 16): the answer Kafka's
 * StandardAuthorizer (org.apache.kafka.metadata.authorizer,
 * StandardAuthorizerData.authorize) gives, for the front end's checks.
 *
 * An ACL is (principal, host, operation, permission) on a resource pattern
 * (resource type, name, LITERAL or PREFIXED; a LITERAL "*" matches every
 * name of its type). For a request by principal P from host H to do
 * operation O on resource (T, N):
 *   - P in super.users: allowed;
 *   - the ACLs on (T, N) are the LITERAL ones named N, the LITERAL "*" and
 *     the PREFIXED ones whose name starts N; of those, the ones that apply
 *     name P or User:*, host H or *, and O or All - or, for an ALLOW only,
 *     an operation that implies O: Read, Write, Delete and Alter imply
 *     Describe, AlterConfigs implies DescribeConfigs (a DENY of Read does
 *     not deny Describe);
 *   - one DENY that applies: denied (DENY wins over any ALLOW, literal or
 *     prefixed); else one ALLOW that applies: allowed;
 *   - else, no ACL at all on (T, N) (for any principal):
 *     allow.everyone.if.no.acl.found; else denied.
 *
 * Threading: the control thread builds an immutable struct km_acl_table
 * and publishes it in the store (km_acl_store_publish); the workers read
 * the published table with one acquire load per check and never lock. A
 * table replaced is kept until the store is freed, as the partition
 * table's views are (part.h): it is replaced only when the ACLs change
 * (the file edited, the source's ACLs changed), an operator's event.
 *
 * Cost: ACLs sorted by (type, pattern, name); a check is two binary
 * searches (the literal name and "*") plus one per distinct length of the
 * type's prefixes, never a scan of every ACL.
 */
#ifndef KM_DATAPLANE_ACL_H
#define KM_DATAPLANE_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kafka's codes (ResourceType, PatternType, AclOperation,
 * AclPermissionType), which DescribeAcls carries. */
enum km_acl_rtype {
	KM_ACL_RES_TOPIC = 2,
	KM_ACL_RES_GROUP = 3,
	KM_ACL_RES_CLUSTER = 4,
	KM_ACL_RES_TXNID = 5,
};

enum km_acl_pattern {
	KM_ACL_LITERAL = 3,
	KM_ACL_PREFIXED = 4,
};

enum km_acl_op {
	KM_ACL_OP_ALL = 2,
	KM_ACL_OP_READ = 3,
	KM_ACL_OP_WRITE = 4,
	KM_ACL_OP_CREATE = 5,
	KM_ACL_OP_DELETE = 6,
	KM_ACL_OP_ALTER = 7,
	KM_ACL_OP_DESCRIBE = 8,
	KM_ACL_OP_CLUSTER_ACTION = 9,
	KM_ACL_OP_DESCRIBE_CONFIGS = 10,
	KM_ACL_OP_ALTER_CONFIGS = 11,
	KM_ACL_OP_IDEMPOTENT_WRITE = 12,
	KM_ACL_OP_CREATE_TOKENS = 13,
	KM_ACL_OP_DESCRIBE_TOKENS = 14,
	KM_ACL_OP_TWO_PHASE_COMMIT = 15,
};

enum km_acl_perm {
	KM_ACL_DENY = 2,
	KM_ACL_ALLOW = 3,
};

/* Where an ACL came from (status). */
enum km_acl_origin {
	KM_ACL_FROM_FILE = 0,
	KM_ACL_FROM_SOURCE = 1,
};

/* Denials are counted per resource type: topic, group, cluster, txn id. */
#define KM_ACL_RTYPES 4
#define KM_ACL_PRINCIPAL_BYTES 256
#define KM_ACL_HOST_BYTES 64
#define KM_ACL_NAME_BYTES 256	/* KM_WIRE_NAME_BYTES_MAX + 1 */
/* Kafka's name of the one CLUSTER resource. */
#define KM_ACL_CLUSTER_NAME "kafka-cluster"

struct km_acl {
	char principal[KM_ACL_PRINCIPAL_BYTES];	/* "User:alice", "User:*" */
	char host[KM_ACL_HOST_BYTES];		/* "*" or an IPv4 address */
	char name[KM_ACL_NAME_BYTES];
	uint8_t rtype;		/* enum km_acl_rtype */
	uint8_t pattern;	/* enum km_acl_pattern */
	uint8_t op;		/* enum km_acl_op */
	uint8_t perm;		/* enum km_acl_perm */
	uint8_t origin;		/* enum km_acl_origin */
};

struct km_acl_table;

/**
 * An immutable table of acls[0..n) (copied), super.users (Kafka's
 * semicolon-separated principals; NULL or "" for none) and
 * allow.everyone.if.no.acl.found. Duplicates are kept once.
 * @return 0 and *out, -EINVAL (an ACL with a type, pattern, operation or
 *         permission outside the enums), -ENOMEM.
 */
int km_acl_table_build(const struct km_acl *acls, uint32_t n,
		       const char *super_users, bool allow_if_no_acl,
		       struct km_acl_table **out);
void km_acl_table_free(struct km_acl_table *t);
/** ACLs held (duplicates counted once), and of them from origin. */
uint32_t km_acl_table_count(const struct km_acl_table *t);
uint32_t km_acl_table_count_from(const struct km_acl_table *t,
				 enum km_acl_origin origin);
/** ACL i in the table's order, i < km_acl_table_count. */
const struct km_acl *km_acl_table_at(const struct km_acl_table *t, uint32_t i);

/**
 * May principal, from host (an IPv4 address, no leading '/'), do op on the
 * resource (rtype, name)? StandardAuthorizer's answer (see the top).
 */
bool km_acl_authorize(const struct km_acl_table *t, const char *principal,
		      const char *host, enum km_acl_op op,
		      enum km_acl_rtype rtype, const char *name);

/**
 * May principal do op on SOME resource of rtype? Kafka's
 * Authorizer.authorizeByResourceType, which InitProducerId asks (Write on
 * any topic stands for IdempotentWrite on the cluster): allowed if the
 * check of a resource named "hardcode" allows (super users), or an ALLOW
 * that applies is not shadowed by a DENY on a pattern that covers it.
 */
bool km_acl_authorize_any(const struct km_acl_table *t, const char *principal,
			  const char *host, enum km_acl_op op,
			  enum km_acl_rtype rtype);

/* ---- the store the workers read ------------------------------------------ */

/* Opaque: an atomic pointer to the table in force, the tables it
 * replaced, and the counters (any thread). */
struct km_acl_store;

/** A store holding t (the store owns it). @return 0 or -ENOMEM. */
int km_acl_store_new(struct km_acl_table *t, struct km_acl_store **out);
/** Control thread: publish t (the store owns it from now). */
void km_acl_store_publish(struct km_acl_store *s, struct km_acl_table *t);
/** Free the store and every table it held (no reader may run). */
void km_acl_store_free(struct km_acl_store *s);
/** The table in force (any thread; valid while the store lives). */
const struct km_acl_table *km_acl_store_get(struct km_acl_store *s);
/** Denials counted under rtype since the store was made. */
uint64_t km_acl_store_denied(struct km_acl_store *s, enum km_acl_rtype rtype);

/** Check through the store, counting a denial under its resource type. */
bool km_acl_store_authorize(struct km_acl_store *s, const char *principal,
			    const char *host, enum km_acl_op op,
			    enum km_acl_rtype rtype, const char *name);
/** km_acl_authorize_any through the store, counted as above. */
bool km_acl_store_authorize_any(struct km_acl_store *s, const char *principal,
				const char *host, enum km_acl_op op,
				enum km_acl_rtype rtype);

/* ---- text ------------------------------------------------------------------ */

/** Kafka's names ("Topic", "Read", "Prefixed", "Allow"), as kafka-acls
 *  prints them; "?" outside the enum. */
const char *km_acl_rtype_name(int rtype);
const char *km_acl_op_name(int op);
const char *km_acl_pattern_name(int pattern);
const char *km_acl_perm_name(int perm);

/**
 * One line of an acls.file:
 *   PRINCIPAL ALLOW|DENY OPERATION TYPE [LITERAL|PREFIXED] NAME [host=HOST]
 * e.g. "User:alice ALLOW Read TOPIC PREFIXED orders- host=*". Words are
 * case-insensitive but the principal and the name; the pattern defaults
 * to LITERAL; TYPE is TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID (CLUSTER's
 * name is kafka-cluster); the host defaults to *. A blank line or one
 * starting with '#' is no ACL.
 * @return 1 and *out, 0 (nothing on the line), or -EINVAL with why.
 */
int km_acl_parse_line(const char *line, struct km_acl *out, char *why,
		      size_t why_cap);

/** The line km_acl_parse_line reads back into a. */
void km_acl_format(const struct km_acl *a, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
