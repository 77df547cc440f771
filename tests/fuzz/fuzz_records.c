/* fuzz_records.c — libFuzzer target: a JSONL record file as `deqbench
 * report FILE.jsonl` and `deqbench suite --resume` read it
 * (record_read_jsonl), then the summary table `report` prints of the
 * records read (record_summary), whatever their fields hold. */
#include "fuzz_util.h"

#include "bench/records/record.h"
#include "bench/report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *arr = json_array();
	char err[1024] = "";

	FUZZ_CHECK(arr);
	if (record_read_jsonl(fuzz_file(data, size), arr, err, sizeof(err)) !=
	    0)
		FUZZ_CHECK(err[0]);
	else
		record_summary(fuzz_devnull(), arr);
	json_decref(arr);
	return 0;
}
