"""deqtorch: deqbench's models and methods in PyTorch, run by
`bench/pytorch/deqtorch.py` (README.md beside it).

Modules: config (keys and the support check; no torch), safetensors and
data (numpy), models, solvers, methods, memory, train, record, common
(deqbench's defaults, the bad-input exit), cli, grad."""
