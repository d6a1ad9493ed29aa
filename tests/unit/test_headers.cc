// Goal: every public header compiles as C++ (STYLE 8) and on its own.
// Method: include them all in one C++ translation unit and touch one symbol
// of each so the link proves the extern "C" guards are right.
#include <gtest/gtest.h>

#include <cstring>

#include "common/chain.h"
#include "common/clock.h"
#include "common/container.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/file.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/varint.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/inflate.h"
#include "kafka/records.h"
#include "kafka/proto.h"
#include "kafka/validate.h"
#include "kafka/wire.h"
#include "iouring_log/log.h"
#include "iouring_log/pstate.h"
#include "iouring_log/segment.h"
#include "iouring_log/uring.h"
#include "dataplane/net/dpdk/dpdk.h"
#include "dataplane/fetch/fetcher.h"
#include "dataplane/serve/frontend.h"
#include "dataplane/fetch/fsess.h"
#include "dataplane/fetch/throttle.h"
#include "dataplane/net/kframe.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/serve/tconfig.h"
#include "dataplane/serve/acl.h"
#include "kafka/proto_acls.h"
#include "dataplane/net/net.h"
#include "control/config.h"
#include "control/cluster_id.h"
#include "control/ctlproto.h"
#include "control/ctlsock.h"

TEST(Headers, LinkFromCxx)
{
	int64_t out;
	uint8_t buf[8];
	EXPECT_EQ(0, km_pid_map(-1, &out));
	EXPECT_NE(nullptr, km_strerror(KM_EBADCRC));
	EXPECT_EQ(0xE3069283u, km_crc32c_update(0, "123456789", 9));
	EXPECT_EQ(1, km_varint_encode_s32(buf, 0));
	EXPECT_STREQ("COMMIT", km_ctrl_type_name(KM_CTRL_COMMIT));
	EXPECT_STREQ("lz4", km_codec_name(KM_CODEC_LZ4));
	km_chain ch = {nullptr, 0};
	struct Holder { int a; km_chain member; } h;
	EXPECT_EQ(&h, km_container_of(&h.member, Holder, member));
	EXPECT_GT(km_clock_wall_ms(), 0);
	EXPECT_FALSE(km_chain_has(&ch, km_chain_start(&ch), 1));
	km_store_be32(buf, 1);
	EXPECT_EQ(1u, km_load_be32(buf));
	KM_ASSERT(KM_BATCH_BYTES_MAX > 0);
	char id[KM_UUID_CHARS + 1];
	ASSERT_EQ(0, km_uuid_random(id));
	EXPECT_EQ(KM_UUID_CHARS, strlen(id));
	EXPECT_EQ(KM_LOG_WARN, km_log_parse_level("warn"));
	km_log_config lc;
	km_log_config_defaults(&lc, "/tmp", "t", 0);
	EXPECT_EQ(4096u, lc.index_interval_bytes);
	km_pstate_config pc = {16, 16};
	EXPECT_GT(km_pstate_memsize(&pc), 0u);
	EXPECT_STREQ("status", km_ctlproto_verb_name(KM_CTL_STATUS));
	EXPECT_EQ(-EINVAL, km_ctlsock_open(nullptr, "", 1));
	EXPECT_GT(km_fsess_pool_memsize(1), 0u);
	EXPECT_NE(nullptr, km_fetcher_err_name(KM_FETCHER_ERR_NOT_LEADER));
	EXPECT_FALSE(km_dpdk_eal_ready());
	(void)&km_frontend_create;
	(void)&km_kframe_init;
	(void)&km_local_write_create;
	(void)&km_validate_batch;
	(void)&km_inflate_create;
	EXPECT_FALSE(km_throttle_on(nullptr));
}
