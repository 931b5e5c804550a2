#!/usr/bin/env python3
"""smaps.py PID [LABEL] - what a process's VmRSS is made of, from /proc/PID/smaps.

Prints one TSV line: label, total Rss kB, then kB per part:
  binary     the executable's own mappings (text, rodata, relro, data)
  baselibs   libc, libm, libgcc_s, ld.so (any Rust/C program has them)
  otherlibs  every other shared library (for crc-appliance: libvirt.so.0 and
             the ~50 libraries it pulls in: glib, gnutls, icu, krb5, curl...)
  heap       [heap] plus anonymous mappings (glibc arenas, tokio, caches)
  stacks     [stack] of the main thread (thread stacks are anonymous: heap)
  threads    number of threads
With -v, also the 15 largest mappings by name.
"""
import os
import re
import sys
from collections import Counter

BASE = re.compile(r"^(libc|libm|libgcc_s|ld-linux[-\w]*|libpthread|libdl|librt)[.-]")


def parts(pid):
    exe = os.path.realpath(f"/proc/{pid}/exe")
    by_name, cat = Counter(), Counter()
    name = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split()
                name = fields[5] if len(fields) > 5 else "[anon]"
            elif line.startswith("Rss:"):
                kb = int(line.split()[1])
                by_name[name] += kb
                base = os.path.basename(name)
                if name == exe or name.startswith(exe + " "):
                    cat["binary"] += kb
                elif ".so" in base and BASE.match(base):
                    cat["baselibs"] += kb
                elif ".so" in base:
                    cat["otherlibs"] += kb
                elif name == "[stack]":
                    cat["stacks"] += kb
                elif name in ("[heap]", "[anon]") or name.startswith("[anon:"):
                    cat["heap"] += kb
                else:
                    cat["other"] += kb
    return cat, by_name


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    pid = args[0]
    label = args[1] if len(args) > 1 else pid
    cat, by_name = parts(pid)
    threads = len(os.listdir(f"/proc/{pid}/task"))
    total = sum(cat.values())
    cols = ["binary", "baselibs", "otherlibs", "heap", "stacks", "other"]
    print("\t".join([label, str(total)] + [str(cat[c]) for c in cols] + [str(threads)]))
    if "-v" in sys.argv:
        for n, kb in by_name.most_common(15):
            print(f"#   {kb:7d} kB  {os.path.basename(n) if '/' in n else n}")


if __name__ == "__main__":
    main()
