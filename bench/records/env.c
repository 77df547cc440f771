/* env.c — host facts from hwloc and uname, device facts from the backend,
 * build facts from the generated dq_build.h. */
#include "env.h"

#include <ctype.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifdef DQ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "dq_build.h"
#include "dq_fingerprint.h"
#include "dq_git.h"
#include "../../kernels/blas_info.h"
#include "../io/jsontext.h"

#ifndef DQ_CFLAGS
#define DQ_CFLAGS "unknown"
#endif

static json_t *host_cache;

/* The CPU model of the first package (else of the machine) without the
 * CPUID padding; JSON null when hwloc does not know it. */
static json_t *cpu_model_json(hwloc_topology_t topo)
{
	hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
	const char *model = NULL;
	char buf[256];
	size_t n;
	if (pkg)
		model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
	if (!model)
		model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo),
						   "CPUModel");
	if (!model)
		return json_null();
	/* CPUID pads the brand string with spaces */
	n = (size_t)snprintf(buf, sizeof(buf), "%s", model);
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = 0;
	return jsontext_buf(buf, sizeof(buf));
}

/* Per cache level present, {"size_bytes": of the first instance, "count":
 * instances} into caches under "l1d_bytes", "l1i_bytes", "l2_bytes",
 * "l3_bytes". */
static void cache_facts(hwloc_topology_t topo, json_t *caches)
{
	static const struct {
		hwloc_obj_type_t t;
		const char *name;
	} cache_types[] = {
	    {HWLOC_OBJ_L1CACHE, "l1d_bytes"},
	    {HWLOC_OBJ_L1ICACHE, "l1i_bytes"},
	    {HWLOC_OBJ_L2CACHE, "l2_bytes"},
	    {HWLOC_OBJ_L3CACHE, "l3_bytes"},
	};
	for (size_t i = 0; i < sizeof(cache_types) / sizeof(*cache_types);
	     i++) {
		hwloc_obj_t c =
		    hwloc_get_obj_by_type(topo, cache_types[i].t, 0);
		int n = hwloc_get_nbobjs_by_type(topo, cache_types[i].t);
		json_t *e;
		if (!c)
			continue;
		e = json_object();
		json_object_set_new(
		    e, "size_bytes",
		    json_integer((json_int_t)c->attr->cache.size));
		json_object_set_new(e, "count", json_integer(n));
		json_object_set_new(caches, cache_types[i].name, e);
	}
}

/* What hwloc knows of the host into o (cpu_model, packages, cores, pus,
 * numa_nodes, memory_bytes; all null when hwloc fails) and caches. */
static void hwloc_facts(json_t *o, json_t *caches)
{
	static const struct {
		const char *key;
		hwloc_obj_type_t t;
	} counts[] = {
	    {"packages", HWLOC_OBJ_PACKAGE},
	    {"cores", HWLOC_OBJ_CORE},
	    {"pus", HWLOC_OBJ_PU},
	    {"numa_nodes", HWLOC_OBJ_NUMANODE},
	};
	hwloc_topology_t topo;
	if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
		/* same keys as on success, so readers need no special case */
		static const char *const keys[] = {
		    "cpu_model",  "packages",	  "cores", "pus",
		    "numa_nodes", "memory_bytes", NULL};
		for (int i = 0; keys[i]; i++)
			json_object_set_new(o, keys[i], json_null());
		return;
	}
	json_object_set_new(o, "cpu_model", cpu_model_json(topo));
	for (size_t i = 0; i < sizeof(counts) / sizeof(*counts); i++)
		json_object_set_new(
		    o, counts[i].key,
		    json_integer(hwloc_get_nbobjs_by_type(topo, counts[i].t)));
	cache_facts(topo, caches);
	json_object_set_new(
	    o, "memory_bytes",
	    json_integer((json_int_t)hwloc_get_root_obj(topo)->total_memory));
	hwloc_topology_destroy(topo);
}

static json_t *host_discover(void)
{
	json_t *o = json_object(), *caches = json_object(), *os = json_object();
	struct utsname u;
	char host[256] = "";

	hwloc_facts(o, caches);
	json_object_set_new(o, "caches", caches);
	json_object_set_new(o, "online_cpus",
			    json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
	if (uname(&u) == 0) {
		json_object_set_new(os, "sysname", jsontext_string(u.sysname));
		json_object_set_new(os, "release", jsontext_string(u.release));
		json_object_set_new(os, "version", jsontext_string(u.version));
		json_object_set_new(os, "machine", jsontext_string(u.machine));
	}
	json_object_set_new(o, "os", os);
	gethostname(host, sizeof(host) - 1);
	json_object_set_new(o, "hostname", jsontext_string(host));
	json_object_set_new(o, "hwloc_api_version",
			    json_integer(HWLOC_API_VERSION));
	return o;
}

static json_t *str_or_null(const char *s)
{
	return s && s[0] ? jsontext_string(s) : json_null();
}

json_t *env_blas_json(void)
{
	struct blas_info b;
	char warn[256];
	blas_info_query(&b);
	json_t *o = json_object();
	json_object_set_new(o, "library", jsontext_string(b.library));
	json_object_set_new(o, "core", str_or_null(b.core));
	json_object_set_new(o, "threads", json_integer(b.threads));
	json_object_set_new(o, "coretype_env", str_or_null(b.coretype_env));
	json_object_set_new(o, "cpu_allows", str_or_null(b.cpu_allows));
	json_object_set_new(o, "generic", json_boolean(b.generic));
	json_object_set_new(o, "warning",
			    blas_info_warning(&b, warn, sizeof(warn))
				? jsontext_string(warn)
				: json_null());
	return o;
}

json_t *env_host_json(void)
{
	if (!host_cache)
		host_cache = host_discover();
	json_t *o = json_deep_copy(host_cache);
	/* not cached: the thread count is the backend's, set per run */
	json_object_set_new(o, "blas", env_blas_json());
	return o;
}

/* The CPUs local to PCI device ID (lowercase bus id) as hwloc sees them, a
 * list such as "0-15,32-47" (malloc'd); NULL when hwloc has no PCI object
 * for it (its pci component is built in on Debian, absent in minimal
 * builds). */
static char *hwloc_local_cpus(const char *id)
{
	hwloc_topology_t topo;
	char *s = NULL;
	if (hwloc_topology_init(&topo) != 0)
		return NULL;
	hwloc_topology_set_io_types_filter(topo,
					   HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (hwloc_topology_load(topo) == 0) {
		hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, id);
		hwloc_obj_t anc =
		    dev ? hwloc_get_non_io_ancestor_obj(topo, dev) : NULL;
		if (!anc || !anc->cpuset ||
		    hwloc_bitmap_list_asprintf(&s, anc->cpuset) < 0) {
			free(s);
			s = NULL;
		}
	}
	hwloc_topology_destroy(topo);
	return s;
}

/* {"local_cpus", "source", "note"} of env_pci_local_cpus_json. */
static json_t *locality(json_t *o, json_t *cpus, const char *source,
			json_t *note)
{
	json_object_set_new(o, "local_cpus", cpus);
	json_object_set_new(o, "source",
			    source ? json_string(source) : json_null());
	json_object_set_new(o, "note", note);
	return o;
}

json_t *env_pci_local_cpus_json(const char *busid)
{
	json_t *o = json_object();
	char id[64], path[160], line[4096] = "", *s;
	const char *note = "no such PCI device";
	FILE *f;
	size_t n = 0;

	for (; busid[n] && n + 1 < sizeof(id); n++)
		id[n] = (char)tolower((unsigned char)busid[n]);
	id[n] = 0;
	/* hwloc first, sysfs where hwloc has no PCI objects */
	if ((s = hwloc_local_cpus(id))) {
		locality(o, jsontext_string(s), "hwloc", json_null());
		free(s);
		return o;
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/local_cpulist",
		 id);
	if ((f = fopen(path, "r"))) {
		if (fgets(line, sizeof(line), f)) {
			size_t l = strlen(line);
			while (l && (line[l - 1] == '\n' || line[l - 1] == ' '))
				line[--l] = 0;
		}
		fclose(f);
		if (line[0])
			return locality(o, jsontext_string(line), "sysfs",
					json_null());
		note = "sysfs local_cpulist is empty";
	}
	return locality(
	    o, json_null(), NULL,
	    json_sprintf("%s %s: hwloc found no PCI object for it (pci "
			 "component absent?) and %s is not readable",
			 note, id, path));
}

/* PCI bus id and local CPUs of the current CUDA device. */
static void cuda_locality(json_t *o)
{
#ifdef DQ_HAVE_CUDA
	char busid[64];
	int dev = 0;
	json_t *loc;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetPCIBusId(busid, sizeof(busid), dev) != cudaSuccess) {
		json_object_set_new(o, "pci_bus_id", json_null());
		json_object_set_new(o, "local_cpus", json_null());
		json_object_set_new(o, "local_cpus_source", json_null());
		json_object_set_new(
		    o, "local_cpus_note",
		    json_string("the CUDA runtime gave no PCI bus id"));
		return;
	}
	json_object_set_new(o, "pci_bus_id", json_string(busid));
	loc = env_pci_local_cpus_json(busid);
	json_object_set(o, "local_cpus", json_object_get(loc, "local_cpus"));
	json_object_set(o, "local_cpus_source", json_object_get(loc, "source"));
	json_object_set(o, "local_cpus_note", json_object_get(loc, "note"));
	json_decref(loc);
#else
	json_object_set_new(o, "pci_bus_id", json_null());
	json_object_set_new(o, "local_cpus", json_null());
	json_object_set_new(o, "local_cpus_source", json_null());
	json_object_set_new(o, "local_cpus_note",
			    json_string("built without CUDA"));
#endif
}

json_t *env_device_json(struct backend *be, const char *device, int tf32)
{
	struct backend_info info;
	json_t *o = json_object();
	memset(&info, 0, sizeof(info));
	be_info(be, &info);
	json_object_set_new(o, "device", json_string(device));
	json_object_set_new(o, "backend", json_string(be_name(be)));
	json_object_set_new(o, "name", jsontext_string(info.name));
	json_object_set_new(o, "elem_bytes",
			    json_integer((json_int_t)be->elem));
	json_object_set_new(o, "total_mem_bytes",
			    json_integer((json_int_t)info.total_mem_bytes));
	json_object_set_new(
	    o, "compute_capability",
	    info.compute_major
		? json_sprintf("%d.%d", info.compute_major, info.compute_minor)
		: json_null());
	json_object_set_new(o, "sm_count", json_integer(info.sm_count));
	json_object_set_new(o, "driver_version",
			    json_integer(info.driver_version));
	json_object_set_new(o, "runtime_version",
			    json_integer(info.runtime_version));
	json_object_set_new(o, "tf32",
			    be_has_device(be) ? json_boolean(tf32 != 0)
					      : json_null());
	if (backend_caps(device) && backend_caps(device)->gpu) {
		cuda_locality(o);
	} else {
		json_object_set_new(o, "pci_bus_id", json_null());
		json_object_set_new(o, "local_cpus", json_null());
		json_object_set_new(o, "local_cpus_source", json_null());
		json_object_set_new(o, "local_cpus_note",
				    json_string("not a PCI device"));
	}
	return o;
}

json_t *env_build_json(void)
{
	json_t *o = json_object();
	json_object_set_new(o, "version", json_string(DQ_VERSION));
	json_object_set_new(o, "git_commit", json_string(DQ_GIT_COMMIT));
	json_object_set_new(o, "compiler", json_string(DQ_COMPILER));
	json_object_set_new(o, "buildtype", json_string(DQ_BUILDTYPE));
	json_object_set_new(o, "flags", json_string(DQ_CFLAGS));
	json_object_set_new(o, "blas", json_string(DQ_BLAS));
	json_object_set_new(o, "sanitize", json_string(DQ_SANITIZE));
	json_object_set_new(o, "cuda_build", json_boolean(DQ_CUDA_BUILD));
	json_object_set_new(o, "fingerprint", json_string(DQ_FINGERPRINT));
	const char *wp = getenv("OMP_WAIT_POLICY");
	json_object_set_new(o, "omp_wait_policy",
			    wp ? jsontext_string(wp) : json_null());
	return o;
}
