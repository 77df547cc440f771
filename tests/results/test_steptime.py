#!/usr/bin/python3
"""test_steptime.py — meson test 'steptime': which step time the findings
quote (plots/steptime.py): a row's runs' mean step times, or its priced
figures where its runs ran beside another and every unit was priced;
report's --price only where price records lie beside the records file.

usage: /usr/bin/python3 tests/results/test_steptime.py SOURCE_ROOT
"""
import os
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def row(labels, priced):
    return {"health": {"labels": labels},
            "step_mean_ms": {"gmean": 10.0, "lo": 9.0, "hi": 11.0},
            "step_mean_x_unroll": {"ratio": 1.5, "lo": 1.2, "hi": 1.8},
            "priced": priced}


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "plots"))
    import steptime as S
    ok = {"matched": True, "note": None, "step_ms": {"gmean": 8.0},
          "x_unroll": {"ratio": 1.1}}
    cases = [
        (row([], None), "measured", 10.0, 1.5),              # alone, no prices
        (row([], ok), "measured", 10.0, 1.5),                # alone: its own times
        (row(["beside 3/3"], ok), "priced", 8.0, 1.1),       # beside: priced
        (row(["beside 1/3"], dict(ok, note="some units have no price: see unpriced")),
         "measured", 10.0, 1.5),                             # partly priced: measured
        (row(["beside 2/2"], dict(ok, matched=False)), "measured", 10.0, 1.5),
        (row(["noisy 2/3"], ok), "measured", 10.0, 1.5),     # noisy alone: measured
    ]
    for r, src, ms, x in cases:
        (o, s1), (q, s2) = S.step(r), S.ratio(r)
        if (s1, s2) != (src, src) or o["gmean"] != ms or q["ratio"] != x or \
                S.value(r) != ms:
            fail(f"labels {r['health']['labels']}, priced {r['priced']}: "
                 f"{s1}/{s2} {o} {q}, want {src} {ms} {x}")
        if S.tag(src) != (" (priced)" if src == "priced" else ""):
            fail(f"tag of {src}: {S.tag(src)!r}")
    with tempfile.TemporaryDirectory() as d:
        recs = os.path.join(d, "suite.jsonl")
        if S.report_args(recs) != []:
            fail("--price without a prices file")
        open(os.path.join(d, "prices.jsonl"), "w").close()
        if S.report_args(recs) != []:
            fail("--price with an empty prices file")
        with open(os.path.join(d, "prices.jsonl"), "w") as f:
            f.write('{"kind": "price"}\n')
        if S.report_args(recs) != ["--price", os.path.join(d, "prices.jsonl")]:
            fail(f"report_args {S.report_args(recs)}")
    print(f"ok: {len(cases)} rows, report's --price")
    return 0


if __name__ == "__main__":
    sys.exit(main())
