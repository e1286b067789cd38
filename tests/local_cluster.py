"""Ports on 127.0.0.1 for the multi-worker tests (a TF_CONFIG cluster of local processes)."""

import socket


def free_ports(count):
  """`count` ports free a moment ago (bound, read and released together, so distinct)."""
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports
