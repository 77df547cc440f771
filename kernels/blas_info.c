/* blas_info.c — see blas_info.h. */
#include "blas_info.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's x86-64 core names (openblas_get_corename, DYNAMIC_ARCH) by
 * the widest vector extension their kernels use: 3 AVX-512, 2 AVX2 + FMA,
 * 1 AVX; every other name is a generic SSE core (0). */
static const struct {
	const char *name;
	int tier;
} cores[] = {
    {"SkylakeX", 3},	  {"Cooperlake", 3}, {"SapphireRapids", 3},
    {"Haswell", 2},	  {"Zen", 2},	     {"Excavator", 2},
    {"Sandybridge", 1},	  {"Bulldozer", 1},  {"Piledriver", 1},
    {"Steamroller", 1},	  {"Prescott", 0},   {"Core2", 0},
    {"Penryn", 0},	  {"Dunnington", 0}, {"Nehalem", 0},
    {"Atom", 0},	  {"Katmai", 0},     {"Coppermine", 0},
    {"Northwood", 0},	  {"Banias", 0},     {"Opteron", 0},
    {"Opteron(SSE3)", 0}, {"Barcelona", 0},  {"Bobcat", 0},
    {"Nano", 0},
};

/* The tier of OpenBLAS core NAME (case-insensitive), -1 when unknown. */
static int core_tier(const char *name)
{
	for (size_t i = 0; i < sizeof(cores) / sizeof(cores[0]); i++)
		if (!strcasecmp(cores[i].name, name))
			return cores[i].tier;
	return -1;
}

/* The tier the CPU's flags allow and the core family naming it. */
static int cpu_tier(const char **name)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512cd")) {
		*name = "SkylakeX";
		return 3;
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		*name = "Haswell";
		return 2;
	}
	if (__builtin_cpu_supports("avx")) {
		*name = "Sandybridge";
		return 1;
	}
#endif
	*name = NULL;
	return 0;
}

void blas_info_query(struct blas_info *out)
{
	const char *cfg = openblas_get_config();
	const char *core = openblas_get_corename();
	const char *env = getenv("OPENBLAS_CORETYPE");
	char ver[32] = "?";
	memset(out, 0, sizeof(*out));
	/* openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
	if (cfg) {
		sscanf(cfg, "%*s %31s", ver);
		snprintf(out->config, sizeof(out->config), "%s", cfg);
	}
	snprintf(out->library, sizeof(out->library), "OpenBLAS %s", ver);
	snprintf(out->core, sizeof(out->core), "%s", core ? core : "");
	snprintf(out->coretype_env, sizeof(out->coretype_env), "%s",
		 env ? env : "");
	out->threads = openblas_get_num_threads();
	int allows = cpu_tier(&out->cpu_allows);
	out->generic = core_tier(out->core) == 0 && allows > 0;
}

int blas_info_warning(const struct blas_info *info, char *buf, unsigned n)
{
	if (n)
		buf[0] = 0;
	if (!info->generic)
		return 0;
	const char *why = info->coretype_env[0]
			      ? "as OPENBLAS_CORETYPE asks"
			      : "its fallback for a CPU model it does not know";
	snprintf(buf, n,
		 "warning: OpenBLAS runs its generic %s kernels (%s) on a CPU "
		 "whose flags allow %s's, often several times faster: set "
		 "OPENBLAS_CORETYPE=%s",
		 info->core, why, info->cpu_allows, info->cpu_allows);
	return 1;
}
