/* blas_info.h — which BLAS library and kernels the CPU backends run, and
 * whether OpenBLAS fell back to generic kernels on a CPU that allows faster
 * ones. OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels at
 * load time from the CPU model; on a model it does not recognise it takes a
 * generic SSE3 core ("Prescott"), which ran SGEMM 1024^3 about 5x slower
 * than its SkylakeX kernels on an AVX-512 Xeon. OPENBLAS_CORETYPE=NAME
 * overrides the choice. */
#ifndef DQ_KERNELS_BLAS_INFO_H
#define DQ_KERNELS_BLAS_INFO_H

struct blas_info {
	char library[64];	/* "OpenBLAS 0.3.21" (openblas_get_config) */
	char config[192];	/* openblas_get_config(): build options */
	char core[32];		/* openblas_get_corename(): "Haswell", ... */
	int threads;		/* openblas_get_num_threads() now */
	char coretype_env[32];	/* $OPENBLAS_CORETYPE, "" when unset */
	const char *cpu_allows; /* the fastest OpenBLAS x86-64 core family
				   the CPU's flags allow: "SkylakeX"
				   (AVX-512 F/BW/VL/DQ/CD), "Haswell" (AVX2 +
				   FMA), "Sandybridge" (AVX), or NULL (none,
				   or not x86-64) */
	int generic;		/* 1: `core` is a generic SSE core although
				   the CPU allows cpu_allows (the slow
				   fallback); 0 otherwise, or when `core`
				   is a name this table does not know */
};

/* Fills *out for this process: call after the backend set its thread
 * count (backend_create with threads > 0) for `threads` to be the run's.
 * Never fails; unknown facts are "" / NULL / 0. */
void blas_info_query(struct blas_info *out);

/* A one-line warning for a generic fallback, naming the OPENBLAS_CORETYPE
 * to set, into buf (n bytes); returns 1 when info->generic, else 0 (buf
 * empty). */
int blas_info_warning(const struct blas_info *info, char *buf, unsigned n);

#endif
