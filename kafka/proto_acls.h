/* DescribeAcls (key 29), v1, client side: kmirrord reads its source's
 * ACLs with it (acls.sync, issue 16). v1 is the first with the pattern
 * type (KIP-290) and the last before the flexible v2; every Kafka since
 * 2.0 serves it (4.0 dropped only v0, KIP-896), so the request header is
 * v1 and the response header v0 without a row in kafka/proto_header.c's
 * table, as the SASL codecs (kafka/sasl.h). Fields as in
 * DescribeAcls{Request,Response}.json. */
#ifndef KM_KAFKA_PROTO_ACLS_H
#define KM_KAFKA_PROTO_ACLS_H

#include <stdint.h>

#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_API_DESCRIBE_ACLS = 29,
	KM_DESCRIBE_ACLS_VERSION = 1,
	/* "SECURITY_DISABLED: Security features are disabled": a broker
	 * with no authorizer answers DescribeAcls with it. */
	KM_KERR_SECURITY_DISABLED = 54,
	/* The filters' ANY (ResourceType, PatternType, AclOperation,
	 * AclPermissionType code 1). */
	KM_ACLS_ANY = 1,
};

struct km_dacls_req {
	int8_t resource_type;
	struct km_wire_name resource_name;	/* nullable: any */
	int8_t pattern_type;
	struct km_wire_name principal;		/* nullable: any */
	struct km_wire_name host;		/* nullable: any */
	int8_t operation;
	int8_t permission_type;
};

/* One ACL of the answer, its resource's fields repeated. */
struct km_dacls_acl {
	int8_t resource_type;
	int8_t pattern_type;
	int8_t operation;
	int8_t permission_type;
	struct km_wire_name resource_name;
	struct km_wire_name principal;
	struct km_wire_name host;
};

struct km_dacls_resp {
	int32_t throttle_time_ms;
	int16_t error_code;
	struct km_wire_name error_message;	/* nullable */
	struct km_dacls_acl *acls;		/* caller's, acls_max */
	uint32_t acls_max;
	uint32_t n_acls;			/* out */
};

/** @return 0, or a wire error (KM_EWIREVERSION for another version). */
int km_dacls_req_encode(struct km_wire_wr *w, int16_t version,
			const struct km_dacls_req *m);
int km_dacls_req_decode(struct km_wire_rd *r, int16_t version,
			struct km_dacls_req *out);
/** @return 0, KM_EWIRECAPACITY (more ACLs than acls_max), a wire error. */
int km_dacls_resp_decode(struct km_wire_rd *r, int16_t version,
			 struct km_dacls_resp *out);
/** Resources are grouped as the ACLs come (consecutive equal ones). */
int km_dacls_resp_encode(struct km_wire_wr *w, int16_t version,
			 const struct km_dacls_resp *m);

#ifdef __cplusplus
}
#endif

#endif
