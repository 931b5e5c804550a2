#!/usr/bin/env python3
"""Write THIRD-PARTY-LICENSES: the crates compiled into crc-appliance and
their licence texts, from Cargo.lock (python3 standard library only).

    scripts/third-party-licenses.py            # rewrite THIRD-PARTY-LICENSES
    scripts/third-party-licenses.py --check    # exit 1 if it is not current

Which crates: those reached from the root package through normal
(non-dev, non-build) dependencies with the default features, on Linux
x86_64 and aarch64 (`cargo metadata --filter-platform`, the union of the
two). Proc-macro crates count (their output is in the binary); build-script
helpers (cc, pkg-config) and test-only crates do not.

Which texts: the crate package's own LICENSE*/LICENCE*/COPYING*/NOTICE*/
UNLICENSE* files; a crate whose package has none (virt-sys,
dhcproto-macros) takes the files of a crate from the same repository.
Identical texts (compared with whitespace collapsed) are printed once with
every crate that carries them.

The licence of every crate must be on the ALLOWED list (each identifier of
its expression); LGPL-2.1 only for the libvirt bindings named in
LGPL_CRATES, which NOTICE covers. A new crate under another licence fails
here (and so in tests/packaging.rs) until someone looks at it.

Needs the crate sources in ~/.cargo/registry (any build fetched them);
runs `cargo metadata --locked --offline`, so no network.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "THIRD-PARTY-LICENSES")
TARGETS = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]
ALLOWED = {
    # Zero-clause BSD (smoltcp, managed: the router advertisement's packet
    # types): public-domain equivalent, no conditions at all.
    "0BSD",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "LLVM-exception",
    "MIT",
    "Unicode-3.0",
    "Unicode-DFS-2016",
    "Unlicense",
    "Zlib",
}
# The libvirt bindings (dynamic link to libvirt.so; see NOTICE).
LGPL_CRATES = {"virt", "virt-sys"}
LICENSE_FILE = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|UNLICENSE)", re.IGNORECASE)
RULE = "=" * 78


def metadata(target):
    cargo = os.environ.get("CARGO", "cargo")
    out = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--locked", "--offline",
         "--filter-platform", target],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def bundled(meta):
    """Package ids reached from the root through normal dependencies."""
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    seen, stack = set(), [meta["resolve"]["root"]]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]):
                stack.append(dep["pkg"])
    return seen


def licence_ids(expr):
    """The identifiers of an SPDX expression (also the old `A/B` form)."""
    words = re.split(r"[\s()/]+", expr or "")
    return {w for w in words if w and w not in ("OR", "AND", "WITH")}


def licence_files(pkg):
    d = os.path.dirname(pkg["manifest_path"])
    names = sorted(f for f in os.listdir(d)
                   if LICENSE_FILE.match(f) and os.path.isfile(os.path.join(d, f)))
    return [(f, open(os.path.join(d, f), encoding="utf-8", errors="replace").read())
            for f in names]


def generate():
    packages, ids = {}, set()
    for t in TARGETS:
        meta = metadata(t)
        packages.update({p["id"]: p for p in meta["packages"]})
        ids |= bundled(meta)
    root = next(p for p in packages.values() if p["source"] is None
                and os.path.dirname(p["manifest_path"]) == ROOT)
    crates = sorted((packages[i] for i in ids if packages[i]["source"] is not None),
                    key=lambda p: (p["name"], p["version"]))
    problems = []
    for p in crates:
        for lid in licence_ids(p["license"]):
            if lid not in ALLOWED and not (lid.startswith("LGPL-2.1") and p["name"] in LGPL_CRATES):
                problems.append(f"{p['name']} {p['version']}: licence {p['license']!r} ({lid}) is not allowed")
    by_repo = {}
    for p in crates:
        by_repo.setdefault(p.get("repository"), []).append(p)
    texts = {}  # normalised text -> (text, [crate labels])
    for p in crates:
        files = licence_files(p)
        if not files and p.get("repository"):
            for other in by_repo[p["repository"]]:
                files = licence_files(other)
                if files:
                    break
        if not files:
            problems.append(f"{p['name']} {p['version']}: no licence file in the package or its repository")
        for name, text in files:
            key = " ".join(text.split())
            texts.setdefault(key, (text.strip("\n"), []))[1].append(f"{p['name']} {p['version']} ({name})")
    if problems:
        sys.exit("third-party-licenses: " + "\n  ".join([""] + problems))

    width = max(len(f"{p['name']} {p['version']}") for p in crates)
    lines = [
        f"Third-party software in {root['name']} {root['version']}",
        "",
        "Generated by scripts/third-party-licenses.py from Cargo.lock; do not edit",
        "(tests/packaging.rs checks that it is current). The crates compiled into",
        f"the binary with the default features on Linux ({', '.join(TARGETS)}),",
        "then each licence text found in their packages, once, with the crates",
        "that carry it. The libvirt bindings (virt, virt-sys; LGPL-2.1) and the",
        "dynamically linked libvirt.so: see NOTICE.",
        "",
        f"{len(crates)} crates:",
        "",
    ]
    for p in crates:
        label = f"{p['name']} {p['version']}"
        lines.append(f"  {label:<{width}}  {p['license']}  {p.get('repository') or ''}".rstrip())
    for text, users in sorted(texts.values(), key=lambda t: (t[1][0], t[0])):
        lines += ["", RULE, "Used by: " + ", ".join(users), RULE, "", text]
    return "\n".join(lines) + "\n"


def main():
    text = generate()
    if sys.argv[1:] == ["--check"]:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit("THIRD-PARTY-LICENSES is not current: run scripts/third-party-licenses.py")
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(OUT)


if __name__ == "__main__":
    main()
