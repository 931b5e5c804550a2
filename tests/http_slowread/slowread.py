#!/usr/bin/env python3
"""Downloads that are never read, from many addresses (tests/http_slowread.rs).

  slowread.py URL PER_SRC HOLD_S READY_FILE SRC...

URL is http://HOST:PORT/PATH or https://HOST:PORT/PATH (TLS: the
server's certificate is not checked). From each SRC, PER_SRC connections
with a 2 KiB receive buffer send `GET PATH` (keep-alive) and never read a
byte; READY_FILE is created once they all were tried. Then, while holding,
each SRC opens one more such connection a second (an attacker that keeps
coming back for the slots it loses). Every socket is kept open until
HOLD_S seconds after the start, then closed.

Bounded in time (HOLD_S; each connect and handshake at most 3 s) and in
count (PER_SRC x sources + HOLD_S x sources). Addresses inside 10.0.0.0/8
only (the test's own network namespaces). Standard library only.
Prints one JSON object: opened, sent (requests sent), failed.
"""
import json
import resource
import socket
import ssl
import sys
import time
from urllib.parse import urlsplit


def main():
    url, per_src, hold, ready = sys.argv[1:5]
    srcs = sys.argv[5:]
    per_src, hold = int(per_src), float(hold)
    u = urlsplit(url)
    host, port, tls = u.hostname, u.port, u.scheme == "https"
    for a in [host] + srcs:
        if not a.startswith("10."):
            sys.exit(f"refusing address {a} outside 10.0.0.0/8")
    want = (per_src + int(hold) + 1) * len(srcs) + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
    request = f"GET {u.path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    st = dict(opened=0, sent=0, failed=0)
    held = []

    def one(src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.settimeout(3)
        try:
            s.bind((src, 0))
            s.connect((host, port))
            st["opened"] += 1
            if ctx is not None:
                s = ctx.wrap_socket(s)
            s.sendall(request)
            st["sent"] += 1
        except OSError:
            st["failed"] += 1
        held.append(s)

    start = time.monotonic()
    end = start + hold
    for src in srcs:
        for _ in range(per_src):
            if time.monotonic() < end:
                one(src)
    open(ready, "w").close()
    next_round = time.monotonic() + 1
    while time.monotonic() < end:
        time.sleep(max(0, min(next_round, end) - time.monotonic()))
        if time.monotonic() >= end:
            break
        next_round += 1
        for src in srcs:
            one(src)
    for s in held:
        s.close()
    print(json.dumps(st), flush=True)


if __name__ == "__main__":
    main()
