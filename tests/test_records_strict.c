/* test_records_strict.c — issue 27: text that is not UTF-8, or cut, never
 * makes a record field vanish (bench/jsontext.h; out= path, suite name,
 * save_params message). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "jsontext.h"
#include "record.h"
#include "test_cli.h"
#include "validate.h"

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "eval_tokens=64", "threads=1", "eval_warmup=0"

/* Runs deqbench with args; asserts the exit status. */
static void run_want(const char *const *args, int want)
{
	char err[4096];
	int rc = cli_run(args, 0, err, sizeof(err));
	cr_assert_eq(rc, want, "%s exited %d, not %d: %s", args[0], rc, want,
		     err);
}

/* The only record of the JSONL file at path (new reference). */
static json_t *only_record(const char *path)
{
	json_t *arr = json_array(), *r;
	char err[1024];
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1, "%s: %zu records", path,
		     json_array_size(arr));
	r = json_incref(json_array_get(arr, 0));
	json_decref(arr);
	return r;
}

/* ---- 12. text that is not UTF-8, or cut ---- */

Test(utf8, helpers_escape_and_cut_between_characters)
{
	/* "é" is c3 a9, "€" e2 82 ac */
	static const char *const bad[] = {"r\xff.jsonl", "a\xc3",
					  "\xe2\x82",	 "\xed\xa0\x80",
					  "\xc0\xaf",	 NULL};
	static const char *const as[] = {"r\\xff.jsonl", "a\\xc3",
					 "\\xe2\\x82",	 "\\xed\\xa0\\x80",
					 "\\xc0\\xaf",	 NULL};
	char buf[16];
	for (int i = 0; bad[i]; i++) {
		json_t *j = jsontext_string(bad[i]);
		cr_assert_not_null(j, "%s", as[i]);
		cr_assert_str_eq(json_string_value(j), as[i]);
		json_decref(j);
	}
	{
		json_t *j = jsontext_string("caf\xc3\xa9 \xe2\x82\xac");
		cr_assert_str_eq(json_string_value(j),
				 "caf\xc3\xa9 \xe2\x82\xac");
		json_decref(j);
	}
	cr_assert_eq(jsontext_fit("ab\xc3\xa9", 3), 2);
	cr_assert_eq(jsontext_fit("ab\xc3\xa9", 4), 4);
	cr_assert_eq(jsontext_fit("a\xe2\x82\xac", 3), 1);
	cr_assert_eq(jsontext_fit("abc", 2), 2);
	snprintf(buf, sizeof(buf), "%s", "abc\xe2\x82");
	jsontext_trim(buf);
	cr_assert_str_eq(buf, "abc");
	snprintf(buf, sizeof(buf), "%s", "abc\xe2\x82\xac");
	jsontext_trim(buf);
	cr_assert_str_eq(buf, "abc\xe2\x82\xac");
	/* a message snprintf cut inside "é" */
	errmsg_set(buf, 6, "%s", "abcd\xc3\xa9");
	cr_assert_str_eq(buf, "abcd");
	{
		char full[6] = "abcd\xc3";
		json_t *j = jsontext_buf(full, sizeof(full));
		cr_assert_str_eq(json_string_value(j), "abcd");
		json_decref(j);
	}
}

/* out=$'r\xff.jsonl': the record keeps config.out, escaped, and is
 * strictly valid. */
Test(utf8, out_path_not_utf8_kept_in_record, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], arg[600], want[600];
	json_t *r;
	cli_path(out, sizeof(out), "r\xff.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, arg, NULL};
		run_want(a, 0);
	}
	r = only_record(out);
	snprintf(want, sizeof(want), "%s/r\\xff.jsonl", cli_dir);
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(r, "config"), "out")),
			 want);
	cr_assert_eq(validate_record(r, VALIDATE_STRICT, NULL, NULL), 0);
	json_decref(r);
}

/* A suite name cut at 255 bytes inside "é": the record's suite.name is the
 * whole characters before it. */
Test(utf8, suite_name_cut_between_characters, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char name[300], text[1024], sp[512], out[512], arg[600];
	json_t *r;
	memset(name, 'a', 254);
	snprintf(name + 254, sizeof(name) - 254, "\xc3\xa9");
	snprintf(text, sizeof(text),
		 "{\"name\": \"%s\", \"base\": {\"corpus\": \"synthetic\", "
		 "\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"seq_len\": "
		 "8, \"batch_size\": 2, \"layers\": 3, \"steps\": 3, "
		 "\"warmup_steps\": 1, \"eval_tokens\": 64, \"threads\": 1}}",
		 name);
	cli_path(sp, sizeof(sp), "s.json");
	cli_write_text(sp, text);
	cli_path(out, sizeof(out), "s.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, NULL};
		run_want(a, 0);
	}
	r = only_record(out);
	name[254] = 0;
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(r, "suite"), "name")),
			 name);
	json_decref(r);
}

/* save_params= failing after training (a file size limit) with a path
 * whose byte 300 is inside "é": the error record's message quotes the
 * path up to the character before, not an empty message. */
Test(utf8, save_params_message_cut_between_characters, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char dir[512], path[1024], out[512], arg[1100], oarg[600], want[400];
	const char *msg;
	size_t n;
	json_t *r;
	cli_path(dir, sizeof(dir), "");
	n = strlen(dir);
	for (int i = 0; i < 100; i++, n += 2)
		snprintf(dir + n, sizeof(dir) - n, "\xc3\xa9");
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", dir,
		 (300 - strlen(dir) - 1) % 2 ? "" : "x");
	n = strlen(path);
	for (int i = 0; i < 40; i++, n += 2)
		snprintf(path + n, sizeof(path) - n, "\xc3\xa9");
	cr_assert_eq((unsigned char)path[300] & 0xc0, 0x80,
		     "byte 300 must continue a character");
	cli_path(out, sizeof(out), "f.jsonl");
	snprintf(arg, sizeof(arg), "save_params=%s", path);
	snprintf(oarg, sizeof(oarg), "out=%s", out);
	{
		/* the parameters (~50 kB) pass the limit, the record not */
		const char *a[] = {"run", TINY, arg, oarg, NULL};
		char err[4096];
		cr_assert_eq(cli_run(a, 20000, err, sizeof(err)), 1, "%s", err);
	}
	r = only_record(out);
	msg = json_string_value(json_object_get(r, "message"));
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")),
			 "error");
	snprintf(want, sizeof(want), "save_params=%.299s: ", path);
	cr_assert(msg && !strncmp(msg, want, strlen(want)),
		  "message '%s' does not start with '%s'", msg ? msg : "",
		  want);
	json_decref(r);
}
