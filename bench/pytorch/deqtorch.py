#!/usr/bin/python3
"""deqtorch: deqbench's models and methods in PyTorch (README.md here).

  deqtorch.py check < [config, ...]        exit 0 when every config runs
  deqtorch.py run < {"config": ..., "data": ...}   one record on stdout
  deqtorch.py grad key=value ... params=P tokens=T out=G
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from deqtorch import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv))
