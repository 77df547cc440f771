/* env.h — facts about where a run happened: host (hwloc, uname), device
 * (backend info) and build (meson's dq_build.h). Each returns a new JSON
 * object reference; see results/SCHEMA.md for the fields. */
#ifndef DQ_BENCH_ENV_H
#define DQ_BENCH_ENV_H

#include <jansson.h>

#include "../../kernels/backend.h"

/* CPU model, packages, cores, PUs, NUMA nodes, cache sizes, memory, OS,
 * hostname: computed once per process and cached (hwloc topology discovery
 * takes milliseconds); the caller gets its own copy, with the BLAS
 * (env_blas_json) read at the call. */
json_t *env_host_json(void);
/* The CPU BLAS this process runs (kernels/blas_info.h): {library, core,
 * threads, coretype_env, cpu_allows, generic, warning}; SCHEMA.md
 * §host.blas. Part of env_host_json. */
json_t *env_blas_json(void);
/* The backend's name and info (device memory, compute capability, ...),
 * whether TF32 GEMMs were allowed (tf32; null on backends without the
 * switch) and, for device "cuda", the PCI bus id and the CPUs local to the
 * GPU (env_pci_local_cpus_json). */
json_t *env_device_json(struct backend *be, const char *device, int tf32);
/* CPUs close to PCI device BUSID ("0000:3b:00.0", any case) as a cpulist
 * string ("0-15,32-47"): from hwloc's PCI discovery (the cpuset of the
 * device's first non-I/O ancestor), else from Linux sysfs
 * /sys/bus/pci/devices/BUSID/local_cpulist. Returns a new object
 * {"local_cpus": string|null, "source": "hwloc"|"sysfs"|null,
 *  "note": null|reason}. */
json_t *env_pci_local_cpus_json(const char *busid);
/* Version, git commit, compiler, build type, flags, BLAS, sanitizer. */
json_t *env_build_json(void);

#endif
