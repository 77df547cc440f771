"""deqwords.py — how the findings name a DEQ and compare its memory with
checkpointing: every DEQ memory figure names its
solver and history, since a DEQ's solver memory is its solver's (full
Broyden history grows with the iteration cap; Broyden keeping its last h
updates or Anderson with m past iterates does not), and the findings say
plainly which keeps less, checkpointing or each DEQ.

Rows are `deqbench report --format json` rows (bench/report/report.h):
`method`, `kind`, `impl`, `config` (the resolved config: f_history is
f_max_iter when 0 was given), `depth_solver_x_unroll`."""


def _num(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def solver_name(c):
    """'Broyden, full history', 'Broyden, history 8', 'Anderson, m = 5'
    (forward solver), with the backward where it is not the forward's
    solver under the IFT ('phantom backward')."""
    fs = c.get("f_solver")
    if fs == "anderson":
        s = f"Anderson, m = {c.get('anderson_m')}"
    elif fs == "broyden":
        h = c.get("f_history")
        s = "Broyden, full history" if not h or h >= c.get("f_max_iter", 0) \
            else f"Broyden, history {h}"
    else:
        s = str(fs).replace("_", " ")
    bh = c.get("b_history")
    if fs == "broyden" and c.get("b_solver") == "broyden" and bh and \
            bh < c.get("b_max_iter", 0) and bh != c.get("f_history"):
        s += f", backward history {bh}"
    if c.get("b_mode") not in (None, "ift"):
        s += f", {c['b_mode']} backward"
    elif c.get("b_solver") not in (None, fs):
        s += f", {c['b_solver']} backward"
    return s


def is_deq(r):
    return r["kind"] == "train" and r["impl"] == "deqbench" and r["method"].startswith("deq")


def label(r):
    """A table's method cell: the report's label, and for a DEQ its
    solver and history."""
    if not r["method"].startswith("deq"):
        return r["method"]
    return f"deq ({solver_name(r['config'])})"


def deq_rows(rows):
    """The DEQ training rows, the full-history Broyden one (the paper's)
    first."""
    ds = [r for r in rows or [] if is_deq(r)]
    return sorted(ds, key=lambda r: solver_name(r["config"]) != "Broyden, full history")


def named(r, figure):
    """'0.475× (Broyden, full history)': a DEQ memory figure with its
    solver."""
    return f"{_num(figure)}× ({solver_name(r['config'])})"


def who_keeps_less(gc, deqs, k):
    """The plain statement: checkpointing every k layers against each DEQ
    in depth+solver memory × unroll; '' when a figure is missing."""
    g = gc and gc.get("depth_solver_x_unroll")
    ds = [d for d in deqs if d.get("depth_solver_x_unroll") is not None]
    if g is None or not ds:
        return ""
    more = [d for d in ds if d["depth_solver_x_unroll"] > g]
    less = [d for d in ds if d["depth_solver_x_unroll"] <= g]
    out = []
    if more:
        what = ("the DEQ" if len(more) == 1 else "every DEQ here") if not less else \
            "the DEQ" + ("s" if len(more) > 1 else "") + " with " + \
            " and ".join(solver_name(d["config"]) for d in more)
        out.append(f"Checkpointing every {k} layers keeps less depth+solver memory than "
                   f"{what}: {_num(g)}× of unroll's against "
                   + ", ".join(named(d, d["depth_solver_x_unroll"]) for d in more) + ".")
    if less:
        out.append(("The DEQ" if len(less) == 1 else "The DEQs") + " with "
                   + " and ".join(solver_name(d["config"]) for d in less)
                   + f" keep{'s' if len(less) == 1 else ''} less than checkpointing: "
                   + ", ".join(named(d, d["depth_solver_x_unroll"]) for d in less)
                   + f" against {_num(g)}×.")
    return " ".join(out)
