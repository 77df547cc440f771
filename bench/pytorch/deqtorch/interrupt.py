"""SIGINT and SIGTERM as deqbench's bench/io/interrupt.h: the first signal
only sets a flag that the training loop and the evaluation read after each
step or batch, so the run ends after the current one and its record says
`interrupted` with the statistics so far; a second signal of either kind
ends the process at once (the default action). deqbench passes its first
signal on to deqtorch once (the child runs in its own process group, so a
terminal's Ctrl-C reaches it only that way). Imports neither torch nor
numpy."""
import signal

_first = 0


def _on_signal(sig, _frame):
    global _first
    _first = sig
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def install():
    """Installs the handlers (no KeyboardInterrupt from here on)."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def first():
    """The first signal received (signal.SIGINT or SIGTERM), or 0."""
    return _first


def name():
    """"SIGINT" or "SIGTERM" for first()'s signal (messages)."""
    return "SIGTERM" if _first == signal.SIGTERM else "SIGINT"
