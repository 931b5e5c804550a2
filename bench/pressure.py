#!/usr/bin/env python3
"""pressure.py - client side of bench/pressure.sh (standard library only).

Every subcommand is bounded in time and prints "key=value" lines that the
shell script turns into TSV rows. Loopback (127.0.0.0/8) addresses only.

  flood HOST PORT N HOLD_S [--src A | --srcs A,B,...] [--head TEXT]
        [--reopen-rate R] [--connect-rate C] [--ready F]
      Open N TCP connections (from source address A, or spread evenly over
      the addresses A,B,...), optionally send TEXT (a partial request head,
      never completed; Python escapes such as \x00 allowed, e.g. the h2
      preface and an empty SETTINGS frame) on each, and hold them for HOLD_S
      seconds or until SIGTERM. At most C connects per second (default: all
      at once). Connections the server closes are counted (and when, after
      their connect: closed_p50_s, closed_max_s); with --reopen-rate R > 0
      they are opened again (at most R per second, like a slowloris that
      reconnects). A connect pending for more than 5 s is given up and
      counted. F is created once N connects were started. Prints opened,
      established_peak, open_at_end, closed_by_server, closed_p50_s,
      closed_max_s, connect_failed, connect_timeout, reopened.
  probe HOST PORT PATH DURATION_S INTERVAL_S TIMEOUT_S [--src A] [--tls]
      One GET per INTERVAL_S for DURATION_S, each on a new connection
      (Connection: close), started on schedule in its own thread whether or
      not the previous one finished, each bounded by TIMEOUT_S. Success =
      status 200 and a complete body. Prints attempts, ok, success_rate,
      p50_ms, p99_ms, max_ms (latencies of the successful requests).
  lbwatch crc URL | haproxy SOCKET  DURATION_S INTERVAL_S
      Poll the LB's own view of its backends (crc-appliance admin
      /api/lb/backends, or HAProxy's stats socket "show stat") and print
      polls, poll_failed, backends, min_up, up_at_end, down_events.
  hapcmd SOCKET CMD
      Send CMD to HAProxy's stats socket and print the answer.
  rss PID INTERVAL_S MAX_S READY_FILE
      Peak VmRSS (kB) of PID and its descendants until SIGTERM or MAX_S;
      prints peak_kb.
  mkign FILE MB
      Write an ignition-like JSON document of about MB megabytes.
  tftphog HOST PORT FILE BURST EVERY_S DURATION_S [--src A] [--ready F]
      Every EVERY_S seconds send BURST TFTP read requests for FILE, each
      from its own UDP port, and never ACK (each transfer the server accepts
      holds its slot until the server gives up). Answers are read for 1 s,
      then the port is closed. F is created after the first burst. Prints
      requests, accepted (DATA/OACK), busy (ERROR), silent.
  tftpget HOST PORT FILE N INTERVAL_S TIMEOUT_S [--src A]
      N downloads of FILE, one started every INTERVAL_S (each in its own
      thread), lock-step 512-byte blocks without options, ACK re-sent after
      1 s of silence, each given up after TIMEOUT_S. Prints attempts, ok,
      success_rate, busy (ERROR answers), timeouts, p50_ms, max_ms.
  udpflood HOST PORT N KIND [--src A]
      Send N DNS datagrams of KIND to HOST:PORT from source address A, in
      bursts of 100 with a 10 ms pause (bounded: at most N datagrams and
      60 s), then read answers for 1 s. KIND: opcode (a query for
      q<i>.bench.crc.testing A with opcode 2, STATUS; a new name each time,
      so no packet cache answers it), edns (the same query with EDNS
      version 1), garbage (12..60 random bytes with QR=0). Prints sent,
      answered, seconds.
  summary TSV
      Median and min-max per (scenario, metric, target) as a Markdown table.
"""
import base64
import json
import os
import random
import resource
import selectors
import signal
import socket
import ssl
import statistics
import sys
import threading
import time


def opts(argv, flags):
    """Split argv into positionals and --flag values (flags: name -> takes value)."""
    pos, kw, i = [], {}, 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and a[2:] in flags:
            if flags[a[2:]]:
                kw[a[2:]] = argv[i + 1]
                i += 2
            else:
                kw[a[2:]] = True
                i += 1
        else:
            pos.append(a)
            i += 1
    return pos, kw


def loopback_only(host):
    if not host.startswith("127."):
        sys.exit(f"refusing non-loopback address {host}")


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n + 64)) if hard != resource.RLIM_INFINITY else max(soft, n + 64)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def out(**kv):
    for k, v in kv.items():
        print(f"{k}={v}", flush=True)


# ---------------------------------------------------------------- flood
def flood(argv):
    pos, kw = opts(argv, {"src": 1, "srcs": 1, "head": 1, "reopen-rate": 1, "connect-rate": 1,
                          "ready": 1})
    host, port, n, hold = pos[0], int(pos[1]), int(pos[2]), float(pos[3])
    loopback_only(host)
    srcs = kw["srcs"].split(",") if kw.get("srcs") else [kw.get("src")]
    for a in srcs:
        if a:
            loopback_only(a)
    # latin-1: "\x00" escapes become single bytes, not UTF-8 sequences.
    head = kw.get("head", "").encode().decode("unicode_escape").encode("latin-1")
    reopen_rate = float(kw.get("reopen-rate", 0))
    connect_rate = float(kw.get("connect-rate", 0))
    raise_nofile(n)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    sel = selectors.DefaultSelector()
    st = dict(opened=0, closed_by_server=0, connect_failed=0, connect_timeout=0, reopened=0,
              established_peak=0)
    pending = {}   # sock -> connect start
    est = set()
    born = {}      # sock -> connect start (for when the server closed it)
    closed_after = []
    nth = [0]

    def start_one():
        src = srcs[nth[0] % len(srcs)]
        nth[0] += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            if src:
                s.bind((src, 0))
            s.connect_ex((host, port))
        except OSError:
            s.close()
            st["connect_failed"] += 1
            return
        st["opened"] += 1
        pending[s] = born[s] = time.monotonic()
        sel.register(s, selectors.EVENT_WRITE)

    def drop(s):
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        pending.pop(s, None)
        est.discard(s)
        born.pop(s, None)
        s.close()

    def event(s):
        """Handle a ready socket; True when it ended (failed or closed)."""
        if s in pending:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            pending.pop(s)
            if err:
                st["connect_failed"] += 1
                drop(s)
                return True
            est.add(s)
            if head:
                try:
                    s.send(head)
                except OSError:
                    pass
            sel.modify(s, selectors.EVENT_READ)
            return False
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if data:
            return False
        # EOF or reset: the server closed it
        st["closed_by_server"] += 1
        closed_after.append(time.monotonic() - born.get(s, t_start))
        drop(s)
        return True

    t_end = time.monotonic() + hold
    t_start = time.monotonic()
    to_reopen = 0
    for i in range(n):
        # Paced: keep reading (and counting closes) while waiting.
        while connect_rate > 0 and time.monotonic() < t_start + i / connect_rate and not stop[0]:
            for key, _ in sel.select(timeout=0.01):
                to_reopen += event(key.fileobj)
        start_one()
        if stop[0]:
            break
    if kw.get("ready"):
        open(kw["ready"], "w").close()
    last_reopen = time.monotonic()
    while not stop[0] and time.monotonic() < t_end:
        for key, ev in sel.select(timeout=0.1):
            to_reopen += event(key.fileobj)
        now = time.monotonic()
        for s, t0 in list(pending.items()):
            if now - t0 > 5:
                st["connect_timeout"] += 1
                drop(s)
                to_reopen += 1
        st["established_peak"] = max(st["established_peak"], len(est))
        if reopen_rate > 0 and to_reopen:
            budget = int((now - last_reopen) * reopen_rate)
            if budget:
                last_reopen = now
                for _ in range(min(budget, to_reopen)):
                    start_one()
                    st["reopened"] += 1
                    to_reopen -= 1
    st["open_at_end"] = len(est)
    st["pending_at_end"] = len(pending)
    closed_after.sort()
    st["closed_p50_s"] = f"{closed_after[len(closed_after) // 2]:.1f}" if closed_after else "nan"
    st["closed_max_s"] = f"{closed_after[-1]:.1f}" if closed_after else "nan"
    for s in list(pending) + list(est):
        drop(s)
    out(**st)


# ---------------------------------------------------------------- probe
def pct(vals, p):
    if not vals:
        return "nan"
    v = sorted(vals)
    k = min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))
    return f"{v[k]:.2f}"


def probe(argv):
    pos, kw = opts(argv, {"src": 1, "tls": 0})
    host, port, path = pos[0], int(pos[1]), pos[2]
    dur, interval, tmo = float(pos[3]), float(pos[4]), float(pos[5])
    loopback_only(host)
    src = kw.get("src")
    if src:
        loopback_only(src)
    ctx = None
    if kw.get("tls"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    res = []
    lock = threading.Lock()
    errs = {}

    def one():
        t0 = time.monotonic()
        ok, why = False, ""
        try:
            s = socket.create_connection((host, port), timeout=tmo,
                                         source_address=(src, 0) if src else None)
            try:
                s.settimeout(max(0.05, tmo - (time.monotonic() - t0)))
                if ctx:
                    s = ctx.wrap_socket(s, server_hostname="bench")
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                buf = b""
                while time.monotonic() - t0 < tmo:
                    s.settimeout(max(0.05, tmo - (time.monotonic() - t0)))
                    d = s.recv(65536)
                    if not d:
                        break
                    buf += d
                hdr, _, body = buf.partition(b"\r\n\r\n")
                lines = hdr.split(b"\r\n")
                cl = [int(x.split(b":", 1)[1]) for x in lines[1:] if x.lower().startswith(b"content-length:")]
                if lines[0].split(b" ")[1:2] == [b"200"] and (not cl or len(body) == cl[0]):
                    ok = True
                else:
                    why = "status:" + lines[0][:40].decode("latin1")
            finally:
                s.close()
        except (OSError, IndexError, ValueError) as e:
            why = type(e).__name__
        dt = (time.monotonic() - t0) * 1000
        with lock:
            res.append((ok, dt))
            if not ok:
                errs[why] = errs.get(why, 0) + 1

    threads = []
    start = time.monotonic()
    k = 0
    while k * interval < dur:
        t_next = start + k * interval
        d = t_next - time.monotonic()
        if d > 0:
            time.sleep(d)
        th = threading.Thread(target=one, daemon=True)
        th.start()
        threads.append(th)
        k += 1
    deadline = time.monotonic() + tmo + 1
    for th in threads:
        th.join(max(0, deadline - time.monotonic()))
    with lock:
        lat = [dt for ok, dt in res if ok]
        n_ok = len(lat)
        out(attempts=k, ok=n_ok, success_rate=f"{n_ok / k:.4f}" if k else "nan",
            p50_ms=pct(lat, 50), p99_ms=pct(lat, 99),
            max_ms=f"{max(lat):.2f}" if lat else "nan",
            errors=";".join(f"{a}:{b}" for a, b in sorted(errs.items())) or "none")


# ---------------------------------------------------------------- lbwatch
def poll_crc(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=1.0) as r:
        doc = json.load(r)
    return [(p["name"] + "/" + b["node"], bool(b["healthy"]))
            for p in doc["pools"] for b in p["backends"]]


def poll_haproxy(sock_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(sock_path)
        s.sendall(b"show stat\n")
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    finally:
        s.close()
    lines = buf.decode().splitlines()
    cols = lines[0].lstrip("# ").split(",")
    ix = {c: i for i, c in enumerate(cols)}
    r = []
    for ln in lines[1:]:
        f = ln.split(",")
        if len(f) < len(cols) or f[ix["svname"]] in ("FRONTEND", "BACKEND"):
            continue
        r.append((f[ix["pxname"]] + "/" + f[ix["svname"]], f[ix["status"]].startswith("UP")))
    return r


def hapcmd(argv):
    """Send one command to HAProxy's stats socket, print the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2.0)
    s.connect(argv[0])
    s.sendall(argv[1].encode() + b"\n")
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    sys.stdout.write(buf.decode())


def lbwatch(argv):
    kind, where, dur, interval = argv[0], argv[1], float(argv[2]), float(argv[3])
    fn = poll_crc if kind == "crc" else poll_haproxy
    polls = failed = 0
    min_up, backends, up_end, down_events = None, 0, "nan", 0
    prev = {}
    end = time.monotonic() + dur
    while time.monotonic() < end:
        t0 = time.monotonic()
        polls += 1
        try:
            st = fn(where)
            backends = len(st)
            up = sum(1 for _, u in st if u)
            up_end = up
            min_up = up if min_up is None else min(min_up, up)
            for name, u in st:
                if prev.get(name) and not u:
                    down_events += 1
                prev[name] = u
        except Exception:   # noqa: BLE001 - any failure to read the status counts
            failed += 1
        time.sleep(max(0, interval - (time.monotonic() - t0)))
    out(polls=polls, poll_failed=failed, backends=backends,
        min_up="nan" if min_up is None else min_up, up_at_end=up_end, down_events=down_events)


# ---------------------------------------------------------------- rss
def tree(pid):
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return seen


def rss_now(pid):
    t = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        t += int(line.split()[1])
        except OSError:
            pass
    return t


def rss(argv):
    pid, interval, max_s, ready = int(argv[0]), float(argv[1]), float(argv[2]), argv[3]
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    peak = rss_now(pid)
    open(ready, "w").close()
    end = time.monotonic() + max_s
    while not stop[0] and time.monotonic() < end:
        peak = max(peak, rss_now(pid))
        time.sleep(interval)
    out(peak_kb=peak)


# ---------------------------------------------------------------- mkign
def mkign(argv):
    path, mb = argv[0], float(argv[1])
    rng = random.Random(16)
    files, size, i = [], 0, 0
    chunk = base64.b64encode(rng.randbytes(48 * 1024)).decode()
    while size < mb * 1e6:
        data = chunk[i % 64:] + chunk[:i % 64]
        files.append({"path": f"/etc/bench/file-{i:05d}", "mode": 420, "overwrite": True,
                      "contents": {"source": "data:text/plain;charset=utf-8;base64," + data}})
        size += len(data) + 120
        i += 1
    doc = {"ignition": {"version": "3.2.0"}, "storage": {"files": files}}
    with open(path, "w") as f:
        json.dump(doc, f)


# ---------------------------------------------------------------- tftp
def tftp_rrq(name):
    return b"\x00\x01" + name.encode() + b"\x00octet\x00"


def tftphog(argv):
    pos, kw = opts(argv, {"src": 1, "ready": 1})
    host, port, name = pos[0], int(pos[1]), pos[2]
    burst, every, dur = int(pos[3]), float(pos[4]), float(pos[5])
    loopback_only(host)
    src = kw.get("src", "127.0.0.1")
    loopback_only(src)
    burst = min(burst, 500)
    sel = selectors.DefaultSelector()
    open_socks = {}  # socket -> close time
    counts = dict(requests=0, accepted=0, busy=0)
    answered = set()
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    start = time.monotonic()
    next_burst = start
    ready = kw.get("ready")
    while not stop[0] and time.monotonic() - start < dur:
        now = time.monotonic()
        if now >= next_burst:
            for _ in range(burst):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((src, 0))
                s.setblocking(False)
                s.sendto(tftp_rrq(name), (host, port))
                sel.register(s, selectors.EVENT_READ)
                open_socks[s] = now + 1.0
                counts["requests"] += 1
            next_burst += every
            if ready:
                open(ready, "w").close()
                ready = None
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                d = s.recv(2048)
            except OSError:
                continue
            if s in answered:
                continue  # a retransmission
            answered.add(s)
            if d[:2] in (b"\x00\x03", b"\x00\x06"):
                counts["accepted"] += 1
            elif d[:2] == b"\x00\x05":
                counts["busy"] += 1
        now = time.monotonic()
        for s, t in list(open_socks.items()):
            if now >= t:
                sel.unregister(s)
                s.close()
                answered.discard(s)
                del open_socks[s]
    for s in open_socks:
        s.close()
    silent = counts["requests"] - counts["accepted"] - counts["busy"]
    out(**counts, silent=silent)


def tftp_download(host, port, name, src, tmo):
    """One lock-step download; returns (ok, why, ms)."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        s.sendto(tftp_rrq(name), (host, port))
        last, tid, want, got = tftp_rrq(name), (host, port), 1, 0
        while True:
            left = tmo - (time.monotonic() - t0)
            if left <= 0:
                return False, "timeout", 0
            s.settimeout(min(1.0, left))
            try:
                d, frm = s.recvfrom(70000)
            except socket.timeout:
                s.sendto(last, tid)  # re-send the last ACK (or the RRQ)
                continue
            if d[:2] == b"\x00\x05":
                return False, "busy", 0
            if d[:2] != b"\x00\x03" or len(d) < 4:
                return False, "unexpected", 0
            tid = frm
            blk = int.from_bytes(d[2:4], "big")
            if blk == want:
                got += len(d) - 4
                want = (want + 1) % 65536
            last = b"\x00\x04" + d[2:4]
            s.sendto(last, tid)
            if blk == (want - 1) % 65536 and len(d) - 4 < 512:
                return True, "", (time.monotonic() - t0) * 1000
    except OSError as e:
        return False, type(e).__name__, 0
    finally:
        s.close()


def tftpget(argv):
    pos, kw = opts(argv, {"src": 1})
    host, port, name = pos[0], int(pos[1]), pos[2]
    n, interval, tmo = min(int(pos[3]), 1000), float(pos[4]), float(pos[5])
    loopback_only(host)
    src = kw.get("src", "127.0.0.1")
    loopback_only(src)
    res, lock, threads = [], threading.Lock(), []

    def one():
        r = tftp_download(host, port, name, src, tmo)
        with lock:
            res.append(r)

    start = time.monotonic()
    for k in range(n):
        d = start + k * interval - time.monotonic()
        if d > 0:
            time.sleep(d)
        th = threading.Thread(target=one, daemon=True)
        th.start()
        threads.append(th)
    deadline = time.monotonic() + tmo + 1
    for th in threads:
        th.join(max(0, deadline - time.monotonic()))
    with lock:
        lat = [ms for ok, _, ms in res if ok]
        out(attempts=n, ok=len(lat), success_rate=f"{len(lat) / n:.4f}" if n else "nan",
            busy=sum(1 for _, why, _ in res if why == "busy"),
            timeouts=sum(1 for _, why, _ in res if why == "timeout"),
            p50_ms=pct(lat, 50), max_ms=f"{max(lat):.2f}" if lat else "nan")
# ---------------------------------------------------------------- udpflood
def dns_datagram(kind, i, rnd):
    qid = (i & 0xFFFF).to_bytes(2, "big")
    # q<i>.bench.crc.testing A IN: a name of the zone both servers answer
    # (pressure.sh dnslog), so the query reaches the zone code, and a new
    # name each time, so no packet cache answers it.
    label = f"q{i}".encode()
    question = (bytes([len(label)]) + label + b"\x05bench\x03crc\x07testing\x00"
                + b"\x00\x01\x00\x01")
    if kind == "opcode":
        return qid + bytes([2 << 3, 0, 0, 1, 0, 0, 0, 0, 0, 0]) + question
    if kind == "edns":
        # OPT: root name, type 41, payload 1232, ext-rcode 0, version 1, flags 0
        opt = b"\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00"
        return qid + bytes([1, 0, 0, 1, 0, 0, 0, 0, 0, 1]) + question + opt
    if kind == "garbage":
        body = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(10, 58)))
        return qid + bytes([body[0] & 0x7F]) + body[1:]
    sys.exit(f"unknown kind {kind}")


def udpflood(argv):
    pos, kw = opts(argv, {"src": 1})
    host, port, n, kind = pos[0], int(pos[1]), int(pos[2]), pos[3]
    loopback_only(host)
    src = kw.get("src", "127.0.0.1")
    loopback_only(src)
    rnd = random.Random(42)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.setblocking(False)
    t0, sent, answered = time.monotonic(), 0, 0
    buf = bytearray(4096)
    for i in range(n):
        if time.monotonic() - t0 > 60:
            break
        try:
            s.sendto(dns_datagram(kind, i, rnd), (host, port))
            sent += 1
        except BlockingIOError:
            pass
        if i % 100 == 99:
            time.sleep(0.01)
        while True:
            try:
                s.recv_into(buf)
                answered += 1
            except BlockingIOError:
                break
    end = time.monotonic() + 1
    while time.monotonic() < end:
        try:
            s.recv_into(buf)
            answered += 1
        except BlockingIOError:
            time.sleep(0.01)
    out(sent=sent, answered=answered, seconds=round(time.monotonic() - t0, 2))


# ---------------------------------------------------------------- summary
def summary(argv):
    import csv
    groups = {}
    for p in argv:
        with open(p, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                try:
                    v = float(row["value"])
                except ValueError:
                    continue
                groups.setdefault((row["scenario"], row["metric"], row["unit"], row["target"]), []).append(v)
    print("| scenario | metric | target | median | min-max | n |")
    print("|---|---|---|---:|---|---:|")
    for (scen, metric, unit, target), vals in groups.items():
        f = lambda x: f"{x:.4g}"   # noqa: E731
        print(f"| {scen} | {metric} ({unit}) | {target} | {f(statistics.median(vals))} | "
              f"{f(min(vals))}-{f(max(vals))} | {len(vals)} |")


if __name__ == "__main__":
    cmds = dict(flood=flood, probe=probe, lbwatch=lbwatch, hapcmd=hapcmd, rss=rss, mkign=mkign,
                tftphog=tftphog, tftpget=tftpget, summary=summary)
    cmds = dict(flood=flood, probe=probe, lbwatch=lbwatch, hapcmd=hapcmd, rss=rss, mkign=mkign, udpflood=udpflood,
                summary=summary)
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])
