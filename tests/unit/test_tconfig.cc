// The synced topic configs store (dataplane/serve/tconfig.h), alone: a
// replace reports a change only when a name or value changed - whatever
// the caller's buffers hold after each string's NUL - so the control
// thread logs, persists and sends the owner new limits only then; entries
// come out sorted by name, as DescribeConfigs lists them.
#include <cstring>

#include <gtest/gtest.h>

extern "C" {
#include "dataplane/serve/tconfig.h"
}

namespace {

km_tconfig_entry entry(const char *name, const char *value, char fill)
{
	km_tconfig_entry e;
	memset(&e, fill, sizeof(e));
	snprintf(e.name, sizeof(e.name), "%s", name);
	snprintf(e.value, sizeof(e.value), "%s", value);
	return e;
}

TEST(TConfig, ReplaceReportsOnlyRealChanges)
{
	km_tconfig *t = nullptr;
	ASSERT_EQ(0, km_tconfig_new(&t));
	km_tconfig_entry a[2] = { entry("retention.ms", "1000", 'x'),
				  entry("cleanup.policy", "compact", 'x') };
	EXPECT_EQ(1, km_tconfig_replace(t, a, 2));
	// the same strings, other bytes after them, another order
	km_tconfig_entry b[2] = { entry("cleanup.policy", "compact", 'y'),
				  entry("retention.ms", "1000", 'z') };
	EXPECT_EQ(0, km_tconfig_replace(t, b, 2));
	b[1] = entry("retention.ms", "2000", 'z');
	EXPECT_EQ(1, km_tconfig_replace(t, b, 2));
	km_tconfig_entry out[4];
	ASSERT_EQ(2u, km_tconfig_copy(t, out, 4));
	EXPECT_STREQ("cleanup.policy", out[0].name);
	EXPECT_STREQ("retention.ms", out[1].name);
	char v[32];
	ASSERT_TRUE(km_tconfig_get(t, "retention.ms", v, sizeof(v)));
	EXPECT_STREQ("2000", v);
	EXPECT_FALSE(km_tconfig_get(t, "segment.bytes", v, sizeof(v)));
	EXPECT_EQ(1, km_tconfig_replace(t, b, 0));
	EXPECT_EQ(0u, km_tconfig_count(t));
	km_tconfig_free(t);
}

} // namespace
