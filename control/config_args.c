/* kmirrord's command line: `--config FILE` and `--set key=value`, each also
 * as `--flag=value`; see config.h. */
#include <stdint.h>
#include <string.h>

#include "common/errors.h"
#include "control/config_pvt.h"

static int arg_value(int argc, const char *const *argv, int *i,
		     const char *flag, const char **out)
{
	size_t n = strlen(flag);
	const char *a = argv[*i];

	if (strncmp(a, flag, n) != 0)
		return 0;
	if (a[n] == '=') {
		*out = a + n + 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*out = argv[++*i];
	return 1;
}

int km_config_load_args(struct km_config *cfg, int argc,
			const char *const *argv, char *err, size_t err_len)
{
	const char *sets[KM_CONFIG_SETS_MAX], *path = NULL, *v = NULL;
	uint32_t n = 0;
	int m;

	for (int i = 1; i < argc; i++) {
		if ((m = arg_value(argc, argv, &i, "--config", &v)) > 0) {
			path = v;
		} else if (m == 0 && (m = arg_value(argc, argv, &i, "--set", &v)) > 0) {
			if (n == KM_CONFIG_SETS_MAX) {
				km_config_errf(err, err_len, "more than %u --set flags",
					       KM_CONFIG_SETS_MAX);
				return KM_ECFGSYNTAX;
			}
			sets[n++] = v;
		} else {
			km_config_errf(err, err_len, "%s %s: %s", argv[i],
				       m < 0 ? "needs a value" : "is not an option",
				       KM_CONFIG_USAGE);
			return KM_ECFGSYNTAX;
		}
	}
	return km_config_load(cfg, path, sets, n, err, err_len);
}
