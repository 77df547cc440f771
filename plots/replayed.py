"""replayed.py — the findings' line on whether this build still computes
the committed CPU records: what results/cpu/replay.json (written by
scripts/replay.py --write, checked by test `replay`) says, per records
file: the same numbers bit for bit, the arithmetic changed since the
records' commit (the first value that differs), or not compared and why.
An entry written for other records (another records commit) is stale and
said to be."""
import json
import os


def records_commit(path):
    """The records' commit(s) of a records file, comma-separated."""
    commits = set()
    with open(path) as f:
        for line in f:
            if line.strip():
                commits.add(str((json.loads(line).get("build") or {}).get("git_commit")))
    return ", ".join(sorted(commits))


def steps(o):
    if o.get("kind") == "eval":
        return "its valid and test loss"
    return f"{o.get('steps')} of {o.get('of')} steps"


def lines(results):
    d = os.path.join(results, "cpu")
    files = sorted(f for f in os.listdir(d) if f.endswith(".jsonl")) if os.path.isdir(d) else []
    if not files:
        return []
    path = os.path.join(d, "replay.json")
    if not os.path.exists(path):
        return ["- Replay: not made — nothing has checked that this build still computes "
                "the CPU records (`scripts/replay.py --write`)."]
    with open(path) as f:
        state = json.load(f)
    entries = state.get("files") or {}
    same, differs, other, stale = [], [], [], []
    for name in files:
        o = entries.get(name)
        suite = name[:-len(".jsonl")]
        if not o or o.get("records_commit") != records_commit(os.path.join(d, name)):
            stale.append(suite)
        elif o["outcome"] == "same":
            same.append((suite, o))
        elif o["outcome"] == "differs":
            differs.append((suite, o))
        else:
            other.append(f"{suite} ({o.get('why')})")
    done = [o for _, o in same + differs]
    at = ", ".join(sorted({str(o.get("replayed_at")) for o in done})) or "?"
    cores = sorted({o["core"] for o in done if o.get("core")})
    inferred = any(o.get("core_source") == "inferred" for o in done)
    out = []
    lead = (f"- Replay (`scripts/replay.py`, test `replay`): at commit {at} on "
            f"{state.get('host')}, OpenBLAS core {', '.join(cores) or '–'}"
            f"{' (the records predate host.blas: the core whose kernels reproduce them)' if inferred else ''}, "
            f"the first configuration of each CPU records file rerun for its first steps")
    if same:
        out.append(f"{lead} gives the records' numbers bit for bit: "
                   + ", ".join(f"{s} ({steps(o)})" for s, o in same) + ".")
    else:
        out.append(f"{lead}: no file gives the records' numbers.")
    for s, o in differs:
        out.append(f"- **The arithmetic changed since commit {o.get('records_commit')}**: "
                   f"at commit {o.get('replayed_at')}, {s}'s first configuration "
                   f"differs from its records at {o.get('first_difference')}; its records "
                   f"no longer say what this build computes.")
    if other:
        out.append("- Not replayed: " + "; ".join(other) + ".")
    if stale:
        out.append(f"- Not replayed against the committed records: {', '.join(stale)} "
                   f"(results/cpu/replay.json is for other records: "
                   f"`scripts/replay.py --write`).")
    return out
