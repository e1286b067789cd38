"""The command-line tools, one module per command: each defines its absl flags when imported,
has `main(argv)`, and `entry()`, what its console script (setup.cfg) and its thin run/ or data/
script call. Nothing in the library imports this package; this file imports none of its
modules (importing one defines its flags)."""

__all__ = []
