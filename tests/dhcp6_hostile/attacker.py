#!/usr/bin/env python3
"""A hostile host on the appliance's link, for tests/dhcp6_hostile.rs.

    attacker.py IF claim MAC          Solicit + Rapid Commit, DUID-LL(MAC)
    attacker.py IF relay MAC          Relay-Forward, option 79 = MAC, DUID-EN
    attacker.py IF decline MAC IAID ADDR
                                      Decline of ADDR as DUID-LL(MAC), IAID
    attacker.py IF churn MAC N        N Solicits + Rapid Commit, each with a
                                      new DUID-LLT(MAC)
    attacker.py IF amp N              Request with N IA_NAs (DUID-EN)

Prints one line: the addresses (or statuses) of the reply, `none` when no
reply came within 2 s, or the counts. Sends only to ff02::1:2 on IF, so
only to the namespaces of the test.
"""
import os, socket, struct, sys, time

IF, CMD = sys.argv[1], sys.argv[2]
IDX = socket.if_nametoindex(IF)
ALL = ("ff02::1:2", 547, 0, IDX)
SOL, REQ, DEC, INF, RFORW = 1, 3, 9, 11, 12


def opt(code, data=b""):
    return struct.pack("!HH", code, len(data)) + data


def mac_of(text):
    return bytes.fromhex(text.replace(":", ""))


def duid_ll(mac):
    return b"\0\3\0\1" + mac


def duid_llt(mac, t):
    return b"\0\1\0\1" + struct.pack("!I", t) + mac


DUID_EN = b"\0\2\0\0\0\x09" + b"hostile!"


def ia_na(iaid, sub=b""):
    return opt(3, struct.pack("!III", iaid, 0, 0) + sub)


def iaaddr(a):
    return opt(5, socket.inet_pton(socket.AF_INET6, a) + struct.pack("!II", 0, 0))


def msg(t, opts):
    return bytes([t]) + os.urandom(3) + b"".join(opts)


def parse_opts(b):
    out = []
    while len(b) >= 4:
        c, l = struct.unpack("!HH", b[:4])
        out.append((c, b[4:4 + l]))
        b = b[4 + l:]
    return out


def addrs(reply):
    """Addresses in a (non-relay) reply; an empty list when it has none."""
    got = []
    for c, d in parse_opts(reply[4:]):
        if c == 3:
            for c2, d2 in parse_opts(d[12:]):
                if c2 == 5:
                    got.append(socket.inet_ntop(socket.AF_INET6, d2[:16]))
    return got


def sock():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, 25, IF.encode())  # SO_BINDTODEVICE
    s.bind(("::", 546))
    return s


def xchg(s, data, timeout=2.0):
    s.sendto(data, ALL)
    s.settimeout(timeout)
    try:
        return s.recvfrom(70000)[0]
    except socket.timeout:
        return None


def server_id(s):
    r = xchg(s, msg(INF, [opt(8, b"\0\0")]))
    return dict(parse_opts(r[4:])).get(2) if r else None


s = sock()
if CMD == "claim":
    r = xchg(s, msg(SOL, [opt(1, duid_ll(mac_of(sys.argv[3]))), ia_na(7), opt(14), opt(8, b"\0\0")]))
    print("claim:", " ".join(addrs(r)) if r else "none")
elif CMD == "relay":
    inner = msg(SOL, [opt(1, DUID_EN), ia_na(7), opt(14), opt(8, b"\0\0")])
    env = bytes([RFORW, 0]) + socket.inet_pton(socket.AF_INET6, "::") \
        + socket.inet_pton(socket.AF_INET6, "fe80::dead") \
        + opt(79, b"\0\1" + mac_of(sys.argv[3])) + opt(9, inner)
    r = xchg(s, env)
    if r:
        inner_r = dict(parse_opts(r[34:])).get(9)
        print("relay:", " ".join(addrs(inner_r)) if inner_r else "reply")
    else:
        print("relay: none")
elif CMD == "decline":
    mac, iaid, addr = mac_of(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    sid = server_id(s)
    d = msg(DEC, [opt(1, duid_ll(mac)), opt(2, sid), ia_na(iaid, iaaddr(addr)), opt(8, b"\0\0")])
    r = xchg(s, d)
    print("decline:", "reply" if r else "none")
elif CMD == "churn":
    mac, n = mac_of(sys.argv[3]), int(sys.argv[4])
    s.setblocking(False)
    got = 0
    for i in range(n):
        d = msg(SOL, [opt(1, duid_llt(mac, 1_000_000 + i)), ia_na(1), opt(14), opt(8, b"\0\0")])
        s.sendto(d, ALL)
        time.sleep(0.002)
        while True:
            try:
                s.recv(70000)
                got += 1
            except BlockingIOError:
                break
    deadline = time.time() + 2
    while time.time() < deadline and got < n:
        try:
            s.recv(70000)
            got += 1
        except BlockingIOError:
            time.sleep(0.01)
    print(f"churn: {n} sent, {got} replies")
elif CMD == "amp":
    n = int(sys.argv[3])
    sid = server_id(s)
    d = msg(REQ, [opt(1, DUID_EN), opt(2, sid), opt(8, b"\0\0")] + [ia_na(j) for j in range(n)])
    r = xchg(s, d)
    print(f"amp: request {len(d)} reply {len(r) if r else 0}")
else:
    sys.exit(f"unknown command {CMD}")
