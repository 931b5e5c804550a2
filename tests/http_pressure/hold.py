#!/usr/bin/env python3
"""Hold many HTTP connections from several loopback addresses (tests/http_pressure.rs).

  hold.py MODE HOST PORT PER_SRC HOLD_S READY_FILE SRC...

MODE
  h2    send the HTTP/2 client preface and an empty SETTINGS frame, then
        nothing (never ACK the server's SETTINGS, never answer a PING);
        a connection the server closes is not opened again, and the script
        ends early once the server has closed them all.
  slow  send "GET /x HTTP/1.1\\r\\nHost: a\\r\\n" and then one more header
        byte every second, never ending the head; a connection the server
        closes is opened again (at most 100 per second in all), like a
        slowloris.

PER_SRC connections from each SRC (127.0.0.0/8 only), held HOLD_S seconds.
READY_FILE is created once the first connects finished (h2: or failed, or
waited 2 s per address; slow: once they were started).
Prints one JSON object: opened, established, closed_by_server,
open_at_end, reopened, connect_failed. Standard library only; bounded in
time (HOLD_S) and count (PER_SRC x sources, plus at most 100 reopens/s).
"""
import json
import resource
import selectors
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # empty SETTINGS, stream 0
HEAD = b"GET /x HTTP/1.1\r\nHost: a\r\n"
TRICKLE = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"


def main():
    mode, host, port, per_src, hold, ready = sys.argv[1:7]
    srcs = sys.argv[7:]
    port, per_src, hold = int(port), int(per_src), float(hold)
    for a in [host] + srcs:
        if not a.startswith("127."):
            sys.exit(f"refusing non-loopback address {a}")
    want = per_src * len(srcs) + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    sel = selectors.DefaultSelector()
    st = dict(opened=0, established=0, closed_by_server=0, reopened=0, connect_failed=0)
    conns = {}  # sock -> {"src", "state": "connecting"|"open", "sent"}

    def start(src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((src, 0))
            s.connect_ex((host, port))
        except OSError:
            s.close()
            st["connect_failed"] += 1
            return
        st["opened"] += 1
        conns[s] = {"src": src, "state": "connecting", "sent": 0}
        sel.register(s, selectors.EVENT_WRITE)

    def drop(s):
        sel.unregister(s)
        conns.pop(s, None)
        s.close()

    end = time.monotonic() + hold
    # h2: one address at a time, each batch connected (or failed) before
    # the next, so no burst overflows the listen backlog (an overflow can
    # leave the client believing in a connection the server never
    # accepted, which no server could close); a batch that cannot finish
    # (SYNs dropped) is waited for 2 s at most, its connects go on. slow:
    # all at once, as a slowloris does, READY as soon as they are sent.
    batch_wait = 2 if mode == "h2" else 0
    for src in srcs:
        for _ in range(per_src):
            start(src)
        batch_end = min(end, time.monotonic() + batch_wait)
        while any(c["state"] == "connecting" for c in conns.values()) and time.monotonic() < batch_end:
            for key, _ in sel.select(timeout=0.1):
                on_event(key.fileobj, conns, st, sel, mode, drop)
    open(ready, "w").close()
    to_reopen = []
    last_trickle = time.monotonic()
    budget_at = time.monotonic()
    while time.monotonic() < end:
        if mode == "h2" and not conns:
            break  # all closed by the server; nothing is reopened
        for key, _ in sel.select(timeout=0.1):
            src = conns.get(key.fileobj, {}).get("src")
            if on_event(key.fileobj, conns, st, sel, mode, drop) == "closed" and mode == "slow":
                to_reopen.append(src)
        now = time.monotonic()
        if mode == "slow" and now - last_trickle >= 1.0:
            last_trickle = now
            for s, c in list(conns.items()):
                if c["state"] == "open":
                    try:
                        s.send(TRICKLE[c["sent"] % len(TRICKLE):][:1])
                        c["sent"] += 1
                    except OSError:
                        pass
        if to_reopen and now - budget_at >= 0.1:
            budget_at = now
            for src in to_reopen[:10]:
                start(src)
                st["reopened"] += 1
            del to_reopen[:10]
    st["open_at_end"] = sum(1 for c in conns.values() if c["state"] == "open")
    for s in list(conns):
        drop(s)
    print(json.dumps(st), flush=True)


def on_event(s, conns, st, sel, mode, drop):
    c = conns.get(s)
    if c is None:
        return None
    if c["state"] == "connecting":
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            st["connect_failed"] += 1
            drop(s)
            return "failed"
        c["state"] = "open"
        st["established"] += 1
        try:
            s.send(PREFACE + SETTINGS if mode == "h2" else HEAD)
        except OSError:
            pass
        sel.modify(s, selectors.EVENT_READ)
        return "open"
    try:
        data = s.recv(65536)
    except OSError:
        data = b""
    if not data:  # EOF or reset: the server closed it
        st["closed_by_server"] += 1
        drop(s)
        return "closed"
    return None  # the server's SETTINGS, GOAWAY, a 408: read and ignored


if __name__ == "__main__":
    main()
