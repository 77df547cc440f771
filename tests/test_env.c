/* test_env.c — host and device facts for the record (bench/records/env.c): the
 * CPUs local to a PCI device, from hwloc or sysfs, and a note instead when
 * the device is not there. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "env.h"

Test(env, pci_local_cpus)
{
	json_t *o = env_pci_local_cpus_json("ffff:ff:1f.7");
	cr_assert(json_is_null(json_object_get(o, "local_cpus")));
	cr_assert(json_is_string(json_object_get(o, "note")));
	json_decref(o);
	/* any PCI device of this machine: a cpulist from hwloc or sysfs */
	{
		FILE *p =
		    popen("ls /sys/bus/pci/devices 2>/dev/null | head -1", "r");
		char id[64] = "";
		if (p) {
			if (!fgets(id, sizeof(id), p))
				id[0] = 0;
			pclose(p);
		}
		id[strcspn(id, "\n")] = 0;
		if (!id[0]) {
			cr_log_info("no PCI devices visible; skipped");
			return;
		}
		o = env_pci_local_cpus_json(id);
		cr_assert(json_is_string(json_object_get(o, "local_cpus")),
			  "%s: %s", id,
			  json_string_value(json_object_get(o, "note")));
		cr_assert(isdigit((unsigned char)json_string_value(
		    json_object_get(o, "local_cpus"))[0]));
		json_decref(o);
	}
}
