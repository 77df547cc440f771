"""What every peer test script starts with (test_peer.py, test_peer_runs.py,
test_selective.py): torch, or exit 77 (meson's skip) with a message where
python3-torch is missing; deqbench's binary and the source root from the
command line; bench/pytorch on sys.path for deqtorch; one torch thread."""
import os
import sys


def setup(name):
    """(torch, DEQBENCH, ROOT, DEQTORCH) for the script `name` run as
    `SCRIPT BUILD/bench/deqbench SOURCE_ROOT`."""
    try:
        import torch
    except ImportError:
        print(f"{name}: python3-torch is not installed (apt-get install "
              "python3-torch); skipping", file=sys.stderr)
        sys.exit(77)
    deqbench, root = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(root, "bench", "pytorch"))
    torch.set_num_threads(1)
    return (torch, deqbench, root,
            os.path.join(root, "bench", "pytorch", "deqtorch.py"))
