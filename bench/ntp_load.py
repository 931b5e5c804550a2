#!/usr/bin/env python3
"""NTP load for bench/ntp.sh: N client-mode requests to HOST:PORT with
WINDOW in flight, for at most LIMIT_S seconds. Prints "answered seconds".
Loopback only; bounded in count and time."""
import socket
import struct
import sys
import time

host, port, n, window, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host, port))
s.settimeout(0.2)
req = bytearray(48)
req[0] = 0x23
sent = answered = 0
t0 = time.monotonic()
inflight = 0
while answered < n and time.monotonic() - t0 < limit:
    while inflight < window and sent < n + n // 10:
        now = time.time() + 2208988800
        req[40:48] = struct.pack("!Q", int(now * 2**32) & 0xFFFFFFFFFFFFFFFF)
        s.send(req)
        sent += 1
        inflight += 1
    try:
        b = s.recv(128)
        if len(b) >= 48:
            answered += 1
        inflight -= 1
    except socket.timeout:
        inflight = 0  # lost: refill the window
        if sent >= n + n // 10:
            break
print(answered, f"{time.monotonic() - t0:.3f}")
