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
#include "dq_git.h"

#ifndef DQ_CFLAGS
#define DQ_CFLAGS "unknown"
#endif

static json_t *host_cache;

static json_t *host_discover(void)
{
	json_t *o = json_object(), *caches = json_object(), *os = json_object();
	hwloc_topology_t topo;
	struct utsname u;
	char host[256] = "";
	const char *model = NULL;

	if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
		static const struct {
			hwloc_obj_type_t t;
			const char *name;
		} cache_types[] = {
		    {HWLOC_OBJ_L1CACHE, "l1d_bytes"},
		    {HWLOC_OBJ_L1ICACHE, "l1i_bytes"},
		    {HWLOC_OBJ_L2CACHE, "l2_bytes"},
		    {HWLOC_OBJ_L3CACHE, "l3_bytes"},
		};
		hwloc_obj_t root = hwloc_get_root_obj(topo);
		hwloc_obj_t pkg =
		    hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
		if (pkg)
			model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
		if (!model)
			model = hwloc_obj_get_info_by_name(root, "CPUModel");
		if (model) {
			/* CPUID pads the brand string with spaces */
			char buf[256];
			size_t n =
			    (size_t)snprintf(buf, sizeof(buf), "%s", model);
			while (n > 0 && buf[n - 1] == ' ')
				buf[--n] = 0;
			json_object_set_new(o, "cpu_model", json_string(buf));
		} else {
			json_object_set_new(o, "cpu_model", json_null());
		}
		json_object_set_new(o, "packages",
				    json_integer(hwloc_get_nbobjs_by_type(
					topo, HWLOC_OBJ_PACKAGE)));
		json_object_set_new(o, "cores",
				    json_integer(hwloc_get_nbobjs_by_type(
					topo, HWLOC_OBJ_CORE)));
		json_object_set_new(
		    o, "pus",
		    json_integer(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU)));
		json_object_set_new(o, "numa_nodes",
				    json_integer(hwloc_get_nbobjs_by_type(
					topo, HWLOC_OBJ_NUMANODE)));
		/* per-instance size (first one) and instance count */
		for (size_t i = 0;
		     i < sizeof(cache_types) / sizeof(*cache_types); i++) {
			hwloc_obj_t c =
			    hwloc_get_obj_by_type(topo, cache_types[i].t, 0);
			int n =
			    hwloc_get_nbobjs_by_type(topo, cache_types[i].t);
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
		json_object_set_new(
		    o, "memory_bytes",
		    json_integer((json_int_t)root->total_memory));
		hwloc_topology_destroy(topo);
	} else {
		/* same keys as on success, so readers need no special case */
		static const char *const keys[] = {
		    "cpu_model",  "packages",	  "cores", "pus",
		    "numa_nodes", "memory_bytes", NULL};
		for (int i = 0; keys[i]; i++)
			json_object_set_new(o, keys[i], json_null());
	}
	json_object_set_new(o, "caches", caches);
	json_object_set_new(o, "online_cpus",
			    json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
	if (uname(&u) == 0) {
		json_object_set_new(os, "sysname", json_string(u.sysname));
		json_object_set_new(os, "release", json_string(u.release));
		json_object_set_new(os, "version", json_string(u.version));
		json_object_set_new(os, "machine", json_string(u.machine));
	}
	json_object_set_new(o, "os", os);
	gethostname(host, sizeof(host) - 1);
	json_object_set_new(o, "hostname", json_string(host));
	json_object_set_new(o, "hwloc_api_version",
			    json_integer(HWLOC_API_VERSION));
	return o;
}

json_t *env_host_json(void)
{
	if (!host_cache)
		host_cache = host_discover();
	return json_deep_copy(host_cache);
}

json_t *env_pci_local_cpus_json(const char *busid)
{
	json_t *o = json_object();
	char id[64], path[160], line[4096] = "";
	const char *note = "no such PCI device";
	hwloc_topology_t topo;
	FILE *f;
	size_t n = 0;

	for (; busid[n] && n + 1 < sizeof(id); n++)
		id[n] = (char)tolower((unsigned char)busid[n]);
	id[n] = 0;
	/* hwloc: PCI objects exist only when its pci component is built in
	 * (Debian: yes; minimal builds: no), hence the sysfs fallback */
	if (hwloc_topology_init(&topo) == 0) {
		hwloc_topology_set_io_types_filter(
		    topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
		if (hwloc_topology_load(topo) == 0) {
			hwloc_obj_t dev =
			    hwloc_get_pcidev_by_busidstring(topo, id);
			hwloc_obj_t anc =
			    dev ? hwloc_get_non_io_ancestor_obj(topo, dev)
				: NULL;
			char *s = NULL;
			if (anc && anc->cpuset &&
			    hwloc_bitmap_list_asprintf(&s, anc->cpuset) >= 0) {
				json_object_set_new(o, "local_cpus",
						    json_string(s));
				json_object_set_new(o, "source",
						    json_string("hwloc"));
				json_object_set_new(o, "note", json_null());
				free(s);
				hwloc_topology_destroy(topo);
				return o;
			}
			free(s);
		}
		hwloc_topology_destroy(topo);
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
		if (line[0]) {
			json_object_set_new(o, "local_cpus", json_string(line));
			json_object_set_new(o, "source", json_string("sysfs"));
			json_object_set_new(o, "note", json_null());
			return o;
		}
		note = "sysfs local_cpulist is empty";
	}
	json_object_set_new(o, "local_cpus", json_null());
	json_object_set_new(o, "source", json_null());
	json_object_set_new(
	    o, "note",
	    json_sprintf("%s %s: hwloc found no PCI object for it (pci "
			 "component absent?) and %s is not readable",
			 note, id, path));
	return o;
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
	be->ops->info(be->ctx, &info);
	json_object_set_new(o, "device", json_string(device));
	json_object_set_new(o, "backend", json_string(be->ops->name));
	json_object_set_new(o, "name", json_string(info.name));
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
			    be->ops->set_tf32 ? json_boolean(tf32 != 0)
					      : json_null());
	if (strcmp(device, "cuda") == 0) {
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
	const char *wp = getenv("OMP_WAIT_POLICY");
	json_object_set_new(o, "omp_wait_policy",
			    wp ? json_string(wp) : json_null());
	return o;
}
