#!/usr/bin/env python3
"""Trim the Kubernetes OpenAPI v3 documents to the component schemas the
stand-in (tests/kubesim/kubesim.py) returns, and check that every kept
schema is, as a JSON value, the upstream one.

    trim.py check --cert F --core F --rbac F   # the kept files against upstream
    trim.py write --cert F --core F --rbac F   # (re)write the kept files

F is the upstream document (api/openapi-spec/v3/<file> of
kubernetes/kubernetes at the commit README.md names), or any text that
contains the kept schemas verbatim (`"<name>": {...}`, as the document
prints them): each kept schema is located by its key and decoded from
there, so a partial copy of the document works too.

Python 3 standard library only.
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
CORE = "io.k8s.api.core.v1."
CERTS = "io.k8s.api.certificates.v1."
RBAC = "io.k8s.api.rbac.v1."

# Output file -> (upstream file name, kept component schemas).
KEPT = {
    "certificates.k8s.io-v1.json": (
        "apis__certificates.k8s.io__v1_openapi.json",
        [CERTS + n for n in ("CertificateSigningRequest", "CertificateSigningRequestCondition",
                             "CertificateSigningRequestList", "CertificateSigningRequestSpec",
                             "CertificateSigningRequestStatus")]
        + [META + n for n in ("FieldsV1", "ListMeta", "ManagedFieldsEntry", "ObjectMeta",
                              "OwnerReference", "Status", "StatusCause", "StatusDetails", "Time",
                              "WatchEvent")]
        + ["io.k8s.apimachinery.pkg.runtime.RawExtension"],
    ),
    "core-v1.json": (
        "api__v1_openapi.json",
        [CORE + n for n in ("AttachedVolume", "ConfigMapNodeConfigSource", "ContainerImage",
                            "DaemonEndpoint", "LocalObjectReference", "Namespace", "NamespaceCondition", "NamespaceList",
                            "NamespaceSpec", "NamespaceStatus", "Node", "NodeAddress",
                            "NodeCondition", "NodeConfigSource", "NodeConfigStatus",
                            "NodeDaemonEndpoints", "NodeList", "NodeSpec", "NodeStatus",
                            "NodeSystemInfo", "ObjectReference", "Secret", "SecretList",
                            "ServiceAccount", "ServiceAccountList", "Taint")]
        + ["io.k8s.apimachinery.pkg.api.resource.Quantity"],
    ),
    "rbac.authorization.k8s.io-v1.json": (
        "apis__rbac.authorization.k8s.io__v1_openapi.json",
        [RBAC + n for n in ("AggregationRule", "ClusterRole", "ClusterRoleBinding",
                            "ClusterRoleBindingList", "ClusterRoleList", "PolicyRule", "Role",
                            "RoleBinding", "RoleBindingList", "RoleList", "RoleRef", "Subject")]
        + [META + n for n in ("LabelSelector", "LabelSelectorRequirement")],
    ),
}


def schemas_in(text, names):
    """name -> schema for each of `names` found in `text` (a whole
    document, or text holding the schemas verbatim)."""
    try:
        doc = json.loads(text)
        have = doc["components"]["schemas"]
        return {n: have[n] for n in names if n in have}
    except (ValueError, KeyError, TypeError):
        pass
    dec = json.JSONDecoder()
    out = {}
    for n in names:
        key = json.dumps(n) + ": "
        at = text.find(key)
        if at >= 0:
            out[n], _ = dec.raw_decode(text, at + len(key))
    return out


def kept_file(name):
    return json.loads((HERE / name).read_text())


def check(sources):
    """Every kept schema equals the upstream one; the kept files hold
    nothing else. Returns the list of problems."""
    problems = []
    for out, (upstream, names) in KEPT.items():
        doc = kept_file(out)
        have = doc["components"]["schemas"]
        extra = sorted(set(have) - set(names))
        if extra:
            problems.append(f"{out}: schemas not in the kept list: {extra}")
        up = schemas_in(Path(sources[out]).read_text(), names)
        for n in names:
            if n not in up:
                problems.append(f"{out}: {n} not found in {sources[out]}")
            elif n not in have:
                problems.append(f"{out}: {n} missing")
            elif have[n] != up[n]:
                problems.append(f"{out}: {n} differs from {upstream}")
        refs = set()
        collect_refs(have, refs)
        others = set()
        for f in KEPT:
            others |= set(kept_file(f)["components"]["schemas"])
        for r in sorted(refs - others):
            problems.append(f"{out}: $ref {r} resolves to no kept schema")
    return problems


def collect_refs(node, refs):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/components/schemas/"):
            refs.add(r.rsplit("/", 1)[1])
        for v in node.values():
            collect_refs(v, refs)
    elif isinstance(node, list):
        for v in node:
            collect_refs(v, refs)


def write(sources):
    meta = json.loads((HERE / "SOURCE.json").read_text())
    for out, (upstream, names) in KEPT.items():
        up = schemas_in(Path(sources[out]).read_text(), names)
        missing = [n for n in names if n not in up]
        if missing:
            sys.exit(f"{sources[out]}: not found: {missing}")
        src = meta[out]
        doc = {
            "x-kubesim-source": {
                "repository": "https://github.com/kubernetes/kubernetes",
                "path": f"api/openapi-spec/v3/{upstream}",
                "commit": src["commit"],
                "license": "Apache-2.0",
                "note": "trimmed to these component schemas, otherwise unchanged",
            },
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "unversioned"},
            "components": {"schemas": {n: up[n] for n in sorted(names)}},
        }
        (HERE / out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["check", "write"])
    ap.add_argument("--cert", help="upstream apis__certificates.k8s.io__v1_openapi.json")
    ap.add_argument("--core", help="upstream api__v1_openapi.json")
    ap.add_argument("--rbac", help="upstream apis__rbac.authorization.k8s.io__v1_openapi.json")
    a = ap.parse_args()
    if not (a.cert and a.core and a.rbac):
        sys.exit("--cert, --core and --rbac name the upstream documents")
    sources = {"certificates.k8s.io-v1.json": a.cert, "core-v1.json": a.core,
               "rbac.authorization.k8s.io-v1.json": a.rbac}
    if a.mode == "write":
        write(sources)
    problems = check(sources)
    for p in problems:
        print(p)
    if problems:
        return 1
    n = sum(len(names) for _, names in KEPT.values())
    print(f"ok: {n} schemas equal upstream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
