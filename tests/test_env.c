/* test_env.c — host and device facts for the record (bench/records/env.c): the
 * CPUs local to a PCI device, from hwloc or sysfs, and a note instead when
 * the device is not there. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include <stdlib.h>
#include <unistd.h>

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

/* The output of `VAR deqbench ARGS` (stdout, or stderr when err) in buf:
 * OpenBLAS reads OPENBLAS_CORETYPE when it loads, so another core needs
 * another process. */
static void deqbench_output(const char *var, const char *args, int err,
			    char *buf, size_t n)
{
	char cmd[1024];
	const char *bin = getenv("DQ_DEQBENCH");
	cr_assert_not_null(bin, "DQ_DEQBENCH is not set (tests/meson.build)");
	snprintf(cmd, sizeof(cmd), "%s '%s' %s %s", var, bin, args,
		 err ? "2>&1 >/dev/null" : "2>/dev/null");
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t got = fread(buf, 1, n - 1, p);
	buf[got] = 0;
	pclose(p);
}

/* host.blas of `VAR deqbench env`. */
static json_t *blas_of_env(const char *var)
{
	static char out[1 << 16];
	deqbench_output(var, "env", 0, out, sizeof(out));
	json_t *o = json_loads(out, 0, NULL);
	cr_assert_not_null(o, "deqbench env printed no JSON");
	json_t *b =
	    json_incref(json_object_get(json_object_get(o, "host"), "blas"));
	json_decref(o);
	cr_assert(json_is_object(b), "env has no host.blas");
	return b;
}

static const char *str_of(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* host.blas names the library, its core and thread count; a generic core
 * on a CPU that allows a faster one is flagged with the
 * OPENBLAS_CORETYPE to set, in the record and on stderr. */
Test(env, blas_core_named_and_generic_fallback_warned, .timeout = 60)
{
	json_t *b = env_blas_json();
	cr_assert(!strncmp(str_of(b, "library"), "OpenBLAS ", 9));
	cr_assert(str_of(b, "core") && str_of(b, "core")[0]);
	cr_assert_geq(json_integer_value(json_object_get(b, "threads")), 1);
	cr_assert_eq(json_is_true(json_object_get(b, "generic")),
		     json_is_string(json_object_get(b, "warning")));
	json_decref(b);

	b = blas_of_env("OPENBLAS_CORETYPE=Prescott");
	char allows[64] = "";
	if (str_of(b, "cpu_allows"))
		snprintf(allows, sizeof(allows), "%s", str_of(b, "cpu_allows"));
	cr_assert_str_eq(str_of(b, "core"), "Prescott");
	cr_assert_str_eq(str_of(b, "coretype_env"), "Prescott");
	char err[4096], want[64];
	deqbench_output("OPENBLAS_CORETYPE=Prescott", "env", 1, err,
			sizeof(err));
	if (!allows[0]) { /* a CPU without AVX: Prescott is what it allows */
		cr_assert(json_is_false(json_object_get(b, "generic")));
		cr_assert_null(strstr(err, "warning"), "%s", err);
		json_decref(b);
		return;
	}
	snprintf(want, sizeof(want), "OPENBLAS_CORETYPE=%s", allows);
	cr_assert(json_is_true(json_object_get(b, "generic")));
	cr_assert_not_null(strstr(str_of(b, "warning"), want));
	cr_assert_not_null(strstr(err, want), "env's stderr: %s", err);
	json_decref(b);

	/* the core the CPU allows: no warning */
	snprintf(want, sizeof(want), "OPENBLAS_CORETYPE=%s", allows);
	b = blas_of_env(want);
	cr_assert(json_is_false(json_object_get(b, "generic")));
	cr_assert(json_is_null(json_object_get(b, "warning")));
	json_decref(b);
	deqbench_output(want, "env", 1, err, sizeof(err));
	cr_assert_null(strstr(err, "warning"), "%s", err);
}

/* A run on generic kernels says so before its first step, and its record
 * names the core and the run's thread count. */
Test(env, run_warns_first_and_records_its_blas, .timeout = 60)
{
	char dir[] = "/tmp/dq_test_env_XXXXXX", args[1024], err[8192];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(args, sizeof(args),
		 "run corpus=synthetic d_model=16 n_heads=2 d_ff=32 "
		 "seq_len=8 batch_size=2 layers=2 steps=3 eval_tokens=32 "
		 "threads=1 out=%s/r.jsonl",
		 dir);
	deqbench_output("OPENBLAS_CORETYPE=Prescott", args, 1, err,
			sizeof(err));
	char path[512];
	snprintf(path, sizeof(path), "%s/r.jsonl", dir);
	json_t *r = json_load_file(path, JSON_DISABLE_EOF_CHECK, NULL);
	cr_assert_not_null(r, "no record: %s", err);
	json_t *b = json_object_get(json_object_get(r, "host"), "blas");
	cr_assert_str_eq(str_of(b, "core"), "Prescott");
	cr_assert_eq(json_integer_value(json_object_get(b, "threads")), 1);
	if (json_is_true(json_object_get(b, "generic")))
		cr_assert(!strncmp(err, "deqbench: warning: OpenBLAS runs", 32),
			  "the warning is not the run's first line: %s", err);
	json_decref(r);
	remove(path);
	rmdir(dir);
}
