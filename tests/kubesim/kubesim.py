#!/usr/bin/env python3
"""kubesim: a stand-in Kubernetes API server for the CSR approver's tests.

Python 3 standard library, plus `jsonschema` (PyPI, in the harness's venv)
for `--openapi`. No Kubernetes API server can be installed
on the test machines, so this one serves the part the appliance and
kubectl use, the way kube-apiserver serves it:

* certificates.k8s.io/v1 CertificateSigningRequests: create (the server
  sets spec.username/groups/uid from the caller, as the real one does),
  get, list, watch, and PUT .../approval (only the Approved/Denied
  conditions of the body are taken; Approved and Denied exclude each
  other; conditions are never removed);
* v1 Nodes (create keeps status, as the real node strategy does; PUT
  .../status), Secrets, ServiceAccounts; rbac.authorization.k8s.io/v1
  ClusterRoles, ClusterRoleBindings, Roles, RoleBindings (what
  `kubectl apply -f` of `render csr-rbac` creates); a Secret of type
  kubernetes.io/service-account-token gets its token, as the token
  controller fills it;
* discovery (/api, /api/v1, /apis, /apis/<g>/<v>) and /version;
* /openapi/v3 and /openapi/v3/<group-version> (with `--openapi`): the
  upstream schemas and `fieldValidation` on every write, so kubectl's
  validation (on by default) runs against this server: with
  fieldValidation=Strict an unknown field is a 400 naming it, otherwise
  it is dropped, as kube-apiserver does;
* watch (`?watch=true`): chunked JSON lines of {"type", "object"} from the
  given resourceVersion, ended by the server after `timeoutSeconds`.

Authentication: TLS client certificates signed by --client-ca (user = CN,
groups = O values, plus system:authenticated) and bearer tokens from
--tokens (a JSON object token -> {"user", "groups"}). Authorization is
RBAC evaluated over the stored (Cluster)Roles and bindings, with
system:masters a superuser and the built-in bootstrap rights preloaded as
objects (kubelets create CSRs; node-bootstrapper creates CSRs). Approval
needs `update` on certificatesigningrequests/approval and `approve` on
signers named by the CSR's signer, as kube-apiserver's admission checks.

Honesty (`--openapi DIR`, which the test harness always passes): every
object the server sends, in a response body or a watch event, is checked
against the Kubernetes OpenAPI v3 schemas of DIR (openapi_check.py; the
trimmed upstream documents of tests/kubesim/openapi/), unknown fields
included. An object that fails is not sent: the request gets a 500 Status
(a watch, an ERROR event) and the failure is appended to `--invalid-log`
and printed as a `KUBESIM-INVALID` line, which the harness turns into a
test failure. What no kept schema covers (discovery documents, /version,
the OpenAPI documents themselves) is marked `"validated": false` in the
access log.
`kubesim.py --openapi DIR --check FILE` checks the JSON objects of FILE
(one per line) and prints `ok` or `invalid: <problems>` for each.

Control (no auth, loopback only, never logged): POST /_sim/drop-watches
ends every open watch; GET /_sim/log the access log as JSON lines
{"method", "path", "user", "status", "validated"}; POST
/_sim/raw/<group or "core">/<plural>[/<namespace>] stores the body as it
is (no defaulting, no checks), for the tests that prove a malformed
object is caught on its way out.

Usage: kubesim.py --listen 127.0.0.1:0 --cert C --key K --client-ca CA
       --tokens FILE [--log FILE] [--openapi DIR --invalid-log FILE]
Prints `READY <port>` once listening.
"""

import argparse
import base64
import copy
import datetime
import json
import secrets
import socket
import ssl
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CERTS = "certificates.k8s.io"
RBAC = "rbac.authorization.k8s.io"

# (group, version, plural) -> (kind, namespaced)
RESOURCES = {
    ("", "v1", "nodes"): ("Node", False),
    ("", "v1", "secrets"): ("Secret", True),
    ("", "v1", "serviceaccounts"): ("ServiceAccount", True),
    ("", "v1", "namespaces"): ("Namespace", False),
    (CERTS, "v1", "certificatesigningrequests"): ("CertificateSigningRequest", False),
    (RBAC, "v1", "clusterroles"): ("ClusterRole", False),
    (RBAC, "v1", "clusterrolebindings"): ("ClusterRoleBinding", False),
    (RBAC, "v1", "roles"): ("Role", True),
    (RBAC, "v1", "rolebindings"): ("RoleBinding", True),
}
SUBRESOURCES = {"certificatesigningrequests": ["approval", "status"], "nodes": ["status"]}
SHORT = {"nodes": ["no"], "certificatesigningrequests": ["csr"], "serviceaccounts": ["sa"],
         "namespaces": ["ns"]}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def builtin_objects():
    """The bootstrap policy the tests rely on, as stored RBAC objects."""
    node_csr = {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:node-bootstrapper"},
        "rules": [{"apiGroups": [CERTS], "resources": ["certificatesigningrequests"],
                   "verbs": ["create", "get", "list", "watch"]}],
    }
    nodes_self = {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:node"},
        "rules": [{"apiGroups": [CERTS], "resources": ["certificatesigningrequests"],
                   "verbs": ["create", "get", "list", "watch"]},
                  {"apiGroups": [""], "resources": ["nodes", "nodes/status"],
                   "verbs": ["create", "get", "list", "watch", "update", "patch"]}],
    }
    bind = lambda name, role, group: {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": group}],
    }
    return [
        ((RBAC, "clusterroles"), node_csr),
        ((RBAC, "clusterroles"), nodes_self),
        ((RBAC, "clusterrolebindings"),
         bind("system:node-bootstrapper", "system:node-bootstrapper",
              "system:serviceaccounts:openshift-machine-config-operator")),
        ((RBAC, "clusterrolebindings"), bind("system:node", "system:node", "system:nodes")),
    ]


class Store:
    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 1
        self.objects = {}  # (group, plural) -> {(ns, name): obj}
        self.events = []  # (rv, group, plural, type, obj)
        self.epoch = 0  # bumped to end watches
        with self.lock:
            for (group, plural), obj in builtin_objects():
                self.put(group, plural, None, obj, "ADDED")

    def put(self, group, plural, ns, obj, kind):
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        if ns:
            meta["namespace"] = ns
        self.objects.setdefault((group, plural), {})[(ns, meta["name"])] = obj
        self.events.append((self.rv, group, plural, kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def get(self, group, plural, ns, name):
        return self.objects.get((group, plural), {}).get((ns, name))

    def items(self, group, plural, ns):
        objs = self.objects.get((group, plural), {})
        return [o for (n, _), o in sorted(objs.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                if ns is None or n == ns]


def rule_allows(rule, verb, group, resource, name):
    def has(key, value):
        vals = rule.get(key, [])
        return "*" in vals or value in vals
    if not (has("verbs", verb) and has("apiGroups", group) and has("resources", resource)):
        return False
    names = rule.get("resourceNames")
    return not names or (name is not None and name in names)


def subject_matches(s, user, groups):
    kind = s.get("kind")
    if kind == "User":
        return s.get("name") == user
    if kind == "Group":
        return s.get("name") in groups
    if kind == "ServiceAccount":
        return user == f"system:serviceaccount:{s.get('namespace')}:{s.get('name')}"
    return False


class Api:
    def __init__(self, tokens, log_path, validator=None, invalid_log=None):
        self.store = Store()
        self.tokens = tokens
        self.log_path = log_path
        self.log_lock = threading.Lock()
        self.log = []
        self.validator = validator
        self.invalid_log = invalid_log

    def problems(self, obj, event=False):
        """None when not validating or no schema covers the object's kind;
        else its problems (empty when valid)."""
        if self.validator is None:
            return None
        return self.validator.check_event(obj) if event else self.validator.check(obj)

    def record_invalid(self, what, problems):
        line = json.dumps({"what": what, "problems": problems})
        print(f"KUBESIM-INVALID {line}", file=sys.stderr, flush=True)
        if self.invalid_log:
            with self.log_lock, open(self.invalid_log, "a") as f:
                f.write(line + "\n")

    def authorized(self, user, groups, verb, group, resource, ns, name):
        if "system:masters" in groups:
            return True
        st = self.store
        with st.lock:
            bindings = [(b, None) for b in st.items(RBAC, "clusterrolebindings", None)]
            bindings += [(b, b["metadata"].get("namespace")) for b in st.items(RBAC, "rolebindings", None)]
            for b, bns in bindings:
                if bns is not None and bns != ns:
                    continue
                if not any(subject_matches(s, user, groups) for s in b.get("subjects", [])):
                    continue
                ref = b.get("roleRef", {})
                if ref.get("kind") == "ClusterRole":
                    role = st.get(RBAC, "clusterroles", None, ref.get("name"))
                else:
                    role = st.get(RBAC, "roles", bns, ref.get("name"))
                for rule in (role or {}).get("rules", []):
                    if rule_allows(rule, verb, group, resource, name):
                        return True
        return False

    def record(self, entry):
        with self.log_lock:
            self.log.append(entry)
            if self.log_path:
                with open(self.log_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")


def pb_fields(buf):
    """The (field number, value) pairs of one protobuf message: varints as
    int, length-delimited as bytes (what the CSR's messages use)."""
    i, out = 0, []

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 2:
            n = varint()
            out.append((field, buf[i:i + n]))
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError("unsupported protobuf wire type")
    return out


def pb_time(buf):
    secs = dict(pb_fields(buf)).get(1, 0)
    return datetime.datetime.fromtimestamp(secs, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def csr_from_protobuf(data):
    """What PUT .../approval needs from kubectl's protobuf body (the typed
    client's encoding: "k8s\\0" + runtime.Unknown{raw = the CSR}):
    metadata.name/resourceVersion and status.conditions (generated.proto of
    k8s.io/api/certificates/v1 and apimachinery's ObjectMeta)."""
    if not data.startswith(b"k8s\x00"):
        return None
    raw = dict(pb_fields(data[4:])).get(2, b"")
    fields = pb_fields(raw)
    meta = dict(pb_fields(dict(fields).get(1, b"")))
    conditions = []
    for f, status in fields:
        if f != 3:
            continue
        for cf, cond in pb_fields(status):
            if cf != 1:
                continue
            c = dict(pb_fields(cond))
            d = {"type": c.get(1, b"").decode(), "status": c.get(6, b"").decode(),
                 "reason": c.get(2, b"").decode(), "message": c.get(3, b"").decode()}
            for num, key in ((4, "lastUpdateTime"), (5, "lastTransitionTime")):
                if c.get(num):
                    d[key] = pb_time(c[num])
            conditions.append(d)
    return {"metadata": {"name": meta.get(1, b"").decode(),
                         "resourceVersion": meta.get(6, b"").decode()},
            "status": {"conditions": conditions}}


def failure(code, reason, message):
    """A Status object for an error response."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def openapi_paths(gv, resources):
    """The `paths` of the OpenAPI v3 document of group-version `gv`."""
    field_validation = {"name": "fieldValidation", "in": "query", "schema": {
        "type": "string", "uniqueItems": True}, "description": "Strict, Warn or Ignore"}
    paths = {}
    for g, v, plural, kind, namespaced in resources:
        gvk = {"group": g, "kind": kind, "version": v}
        base = f"/{gv}/namespaces/{{namespace}}/{plural}" if namespaced else f"/{gv}/{plural}"

        def op(action):
            return {"operationId": f"{action}{kind}", "parameters": [field_validation],
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
        paths[base] = {"post": op("post")}
        paths[base + "/{name}"] = {"put": op("put"), "patch": op("patch")}
    return paths


def parse_path(path):
    """-> (group, version, plural, ns, name, sub) or a discovery tuple."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[1:]
    elif parts[:1] == ["apis"]:
        group, rest = (parts[1] if len(parts) > 1 else None), parts[2:]
    else:
        return None
    if not rest:
        return ("discovery", group, None)
    version, rest = rest[0], rest[1:]
    if not rest:
        return ("discovery", group, version)
    ns = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        ns, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if len(rest) > 3:
        return None
    return (group, version, plural, ns, name, sub)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api = None  # set by main

    def log_message(self, fmt, *args):
        pass

    def identity(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            t = self.api.tokens.get(auth[7:].strip())
            if t is None:
                return None
            return t["user"], list(t.get("groups", [])) + ["system:authenticated"]
        cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        if cert:
            cn, orgs = None, []
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
                    elif k == "organizationName":
                        orgs.append(v)
            if cn:
                return cn, orgs + ["system:authenticated"]
        return None

    def send_json(self, code, obj, user="-"):
        problems = self.api.problems(obj)
        if problems:
            self.api.record_invalid(f"{self.command} {self.path}", problems)
            code, obj = 500, failure(500, "InternalError",
                                     "kubesim: the response failed OpenAPI validation: "
                                     + "; ".join(problems))
            problems = self.api.problems(obj)
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.api.record({"method": self.command, "path": self.path, "user": user, "status": code,
                         "validated": problems is not None})

    def status(self, code, reason, message, user="-"):
        self.send_json(code, failure(code, reason, message), user)

    def body(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        data = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Type", "").startswith("application/vnd.kubernetes.protobuf"):
            return csr_from_protobuf(data)
        return json.loads(data) if data else None

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def route(self, method):
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        if url.path.startswith("/_sim/"):
            return self.control(method, url.path)
        if url.path in ("/version", "/version/"):
            return self.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.4-kubesim",
                                        "platform": "linux/amd64"})
        if url.path.startswith("/openapi/"):
            return self.openapi(url.path)
        who = self.identity()
        if who is None:
            return self.status(401, "Unauthorized", "Unauthorized")
        user, groups = who
        p = parse_path(url.path)
        if p is None:
            return self.status(404, "NotFound", f"the server could not find {url.path}", user)
        if p[0] == "discovery":
            return self.discovery(p[1], p[2], user)
        group, version, plural, ns, name, sub = p
        if (group, version, plural) not in RESOURCES or (sub and sub not in SUBRESOURCES.get(plural, [])):
            return self.status(404, "NotFound", f"the server could not find {url.path}", user)
        watch = q.get("watch", [""])[0] in ("true", "1")
        verb = {"GET": "watch" if watch else ("get" if name else "list"), "POST": "create",
                "PUT": "update", "DELETE": "delete"}[method]
        resource = f"{plural}/{sub}" if sub else plural
        if not self.api.authorized(user, groups, verb, group, resource, ns, name):
            return self.status(403, "Forbidden",
                               f'{plural} is forbidden: User "{user}" cannot {verb} resource '
                               f'"{resource}" in API group "{group}"', user)
        handler = {"watch": self.watch, "list": self.list, "get": self.get_one,
                   "create": self.create, "update": self.update, "delete": self.delete}[verb]
        handler(user, groups, group, version, plural, ns, name, sub, q)

    def control(self, method, path):
        if self.client_address[0] not in ("127.0.0.1", "::1"):
            return self.status(403, "Forbidden", "control is loopback only")
        st = self.api.store
        if path == "/_sim/drop-watches" and method == "POST":
            with st.lock:
                st.epoch += 1
                st.lock.notify_all()
            return self.send_json(200, {"dropped": True})
        if path == "/_sim/log":
            with self.api.log_lock:
                return self.send_json(200, {"log": list(self.api.log)})
        parts = path.split("/")[3:]
        if path.startswith("/_sim/raw/") and method == "POST" and len(parts) in (2, 3):
            group = "" if parts[0] == "core" else parts[0]
            ns = parts[2] if len(parts) == 3 else None
            obj = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with st.lock:
                st.objects.setdefault((group, parts[1]), {})[(ns, str(obj["metadata"]["name"]))] = obj
                st.rv += 1
                st.events.append((st.rv, group, parts[1], "ADDED", copy.deepcopy(obj)))
                st.lock.notify_all()
            return self.send_json(201, {"stored": True})
        return self.status(404, "NotFound", path)

    def openapi(self, path):
        """GET /openapi/v3 (the index) and /openapi/v3/<api/v1 or
        apis/<group>/<version>>: the kept upstream schemas, and for each
        resource its collection and item paths whose POST, PUT and PATCH
        take `fieldValidation` and name their kind, as kube-apiserver's
        documents do (kubectl reads them to decide that the server
        validates fields, and then sends fieldValidation=Strict)."""
        validator = self.api.validator
        if validator is None:
            return self.status(404, "NotFound", "started without --openapi")
        gvs = {}
        for (g, v, plural), (kind, namespaced) in RESOURCES.items():
            gvs.setdefault(f"apis/{g}/{v}" if g else f"api/{v}", []).append(
                (g, v, plural, kind, namespaced))
        if path.rstrip("/") == "/openapi/v3":
            return self.send_json(200, {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}"}
                                                  for gv in sorted(gvs)}})
        gv = path[len("/openapi/v3/"):].strip("/")
        if gv not in gvs:
            return self.status(404, "NotFound", f"no OpenAPI document for {gv}")
        return self.send_json(200, validator.document(openapi_paths(gv, gvs[gv])))

    def field_problems(self, obj, q, user):
        """Server-side field validation of a create or update body: with
        fieldValidation=Strict an unknown field is a 400 (sent, True is
        returned); otherwise unknown fields are dropped, as kube-apiserver
        drops them."""
        unknown = self.api.validator.unknown(obj, prune=True) if self.api.validator else None
        if unknown and q.get("fieldValidation", [""])[0] == "Strict":
            kind, version = obj["kind"], obj["apiVersion"].rsplit("/", 1)[-1]
            self.status(400, "BadRequest",
                        f'{kind} in version "{version}" cannot be handled as a {kind}: strict '
                        "decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown),
                        user)
            return True
        return False

    def discovery(self, group, version, user):
        if group == "" and version is None:
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [
                                            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
                                  user)
        if group is None:
            groups = sorted({g for (g, _, _) in RESOURCES if g})
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in groups]},
                                  user)
        if version is None:
            return self.send_json(200, {"kind": "APIGroup", "apiVersion": "v1", "name": group,
                                        "versions": [{"groupVersion": f"{group}/v1", "version": "v1"}],
                                        "preferredVersion": {"groupVersion": f"{group}/v1",
                                                             "version": "v1"}}, user)
        res = []
        for (g, v, plural), (kind, namespaced) in RESOURCES.items():
            if g != group or v != version:
                continue
            res.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                        "kind": kind, "verbs": VERBS, "shortNames": SHORT.get(plural, [])})
            for sub in SUBRESOURCES.get(plural, []):
                res.append({"name": f"{plural}/{sub}", "singularName": "", "namespaced": namespaced,
                            "kind": kind, "verbs": ["get", "update", "patch"]})
        if not res:
            return self.status(404, "NotFound", f"no group version {group}/{version}", user)
        gv = f"{group}/{version}" if group else version
        return self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                    "groupVersion": gv, "resources": res}, user)

    def api_version(self, group, version):
        return f"{group}/{version}" if group else version

    def list(self, user, groups, group, version, plural, ns, name, sub, q):
        st = self.api.store
        kind = RESOURCES[(group, version, plural)][0]
        with st.lock:
            items = [copy.deepcopy(o) for o in st.items(group, plural, ns)]
            rv = str(st.rv)
        for o in items:
            o["apiVersion"], o["kind"] = self.api_version(group, version), kind
        self.send_json(200, {"kind": f"{kind}List", "apiVersion": self.api_version(group, version),
                             "metadata": {"resourceVersion": rv}, "items": items}, user)

    def get_one(self, user, groups, group, version, plural, ns, name, sub, q):
        st = self.api.store
        with st.lock:
            obj = copy.deepcopy(st.get(group, plural, ns, name))
        if obj is None:
            return self.status(404, "NotFound", f'{plural} "{name}" not found', user)
        self.send_json(200, obj, user)

    def create(self, user, groups, group, version, plural, ns, name, sub, q):
        obj = self.body()
        if name or sub or not isinstance(obj, dict):
            return self.status(405, "MethodNotAllowed", "create on a collection only", user)
        kind = RESOURCES[(group, version, plural)][0]
        obj["apiVersion"], obj["kind"] = self.api_version(group, version), kind
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)
        if not meta.get("name"):
            return self.status(422, "Invalid", "metadata.name: Required value", user)
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(k, None)
        if self.field_problems(obj, q, user):
            return None
        if plural == "certificatesigningrequests":
            spec = obj.setdefault("spec", {})
            if not spec.get("request") or not spec.get("signerName"):
                return self.status(422, "Invalid", "spec.request and spec.signerName are required", user)
            spec["username"], spec["groups"] = user, groups
            spec["uid"] = str(uuid.uuid5(uuid.NAMESPACE_OID, user))
            obj["status"] = {}
        if plural == "secrets" and obj.get("type") == "kubernetes.io/service-account-token":
            sa = meta.get("annotations", {}).get("kubernetes.io/service-account.name")
            token = secrets.token_urlsafe(24)
            self.api.tokens[token] = {"user": f"system:serviceaccount:{ns}:{sa}",
                                      "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]}
            obj.setdefault("data", {})["token"] = base64.b64encode(token.encode()).decode()
        st = self.api.store
        with st.lock:
            if st.get(group, plural, ns, meta["name"]) is not None:
                return self.status(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists', user)
            st.put(group, plural, ns, obj, "ADDED")
            out = copy.deepcopy(obj)
        self.send_json(201, out, user)

    def update(self, user, groups, group, version, plural, ns, name, sub, q):
        new = self.body()
        st = self.api.store
        if not isinstance(new, dict) or not name:
            return self.status(400, "BadRequest", "an object is required", user)
        if not sub:
            new["apiVersion"] = self.api_version(group, version)
            new["kind"] = RESOURCES[(group, version, plural)][0]
            if self.field_problems(new, q, user):
                return None
        if sub == "approval":
            signer = ((st.get(group, plural, ns, name) or {}).get("spec") or {}).get("signerName", "")
            if not self.api.authorized(user, groups, "approve", CERTS, "signers", None, signer) and \
                    not self.api.authorized(user, groups, "approve", CERTS, "signers", None,
                                            signer.split("/")[0] + "/*"):
                return self.status(403, "Forbidden",
                                   f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: '
                                   f'user not permitted to approve requests with signerName "{signer}"', user)
        with st.lock:
            cur = st.get(group, plural, ns, name)
            if cur is None:
                return self.status(404, "NotFound", f'{plural} "{name}" not found', user)
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                return self.status(409, "Conflict", "the object has been modified", user)
            obj = copy.deepcopy(cur)
            if sub == "approval":
                err = self.apply_approval(obj, new)
                if err:
                    return self.status(422, "Invalid", err, user)
            elif sub == "status":
                obj["status"] = new.get("status", {})
            else:
                keep = obj["metadata"]
                obj = new
                obj["metadata"] = {**keep, **{k: v for k, v in new.get("metadata", {}).items()
                                              if k in ("labels", "annotations")}}
            st.put(group, plural, ns, obj, "MODIFIED")
            out = copy.deepcopy(obj)
        self.send_json(200, out, user)

    @staticmethod
    def apply_approval(obj, new):
        have = {c["type"]: c for c in obj.setdefault("status", {}).setdefault("conditions", [])}
        for c in (new.get("status") or {}).get("conditions") or []:
            t = c.get("type")
            if t not in ("Approved", "Denied"):
                continue
            if c.get("status") != "True":
                return f"status.conditions: {t} must be True"
            other = "Denied" if t == "Approved" else "Approved"
            if other in have:
                return f"status.conditions: {t} and {other} exclude each other"
            if t not in have:
                c = dict(c)
                c.setdefault("lastUpdateTime", now_rfc3339())
                c.setdefault("lastTransitionTime", now_rfc3339())
                obj["status"]["conditions"].append(c)
                have[t] = c
        return None

    def delete(self, user, groups, group, version, plural, ns, name, sub, q):
        st = self.api.store
        with st.lock:
            obj = st.objects.get((group, plural), {}).pop((ns, name), None)
            if obj is None:
                return self.status(404, "NotFound", f'{plural} "{name}" not found', user)
            st.rv += 1
            st.events.append((st.rv, group, plural, "DELETED", copy.deepcopy(obj)))
            st.lock.notify_all()
        self.send_json(200, obj, user)

    def watch(self, user, groups, group, version, plural, ns, name, sub, q):
        st = self.api.store
        since = int(q.get("resourceVersion", ["0"])[0] or 0)
        timeout = min(int(q.get("timeoutSeconds", ["1800"])[0] or 1800), 1800)
        kind = RESOURCES[(group, version, plural)][0]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.api.record({"method": "GET", "path": self.path, "user": user, "status": 200})
        deadline = datetime.datetime.now().timestamp() + timeout
        with st.lock:
            epoch = st.epoch
            if since == 0:
                pending = [(st.rv, "ADDED", copy.deepcopy(o)) for o in st.items(group, plural, ns)]
            else:
                pending = []
            cursor = st.rv if since == 0 else since
        try:
            while True:
                with st.lock:
                    for rv, g, p, t, o in st.events:
                        if rv > cursor and g == group and p == plural and \
                                (ns is None or o["metadata"].get("namespace") == ns):
                            pending.append((rv, t, o))
                    cursor = st.rv
                for _, t, o in pending:
                    o = copy.deepcopy(o)
                    o["apiVersion"], o["kind"] = self.api_version(group, version), kind
                    event = {"type": t, "object": o}
                    problems = self.api.problems(event, event=True)
                    if problems:
                        self.api.record_invalid(f"watch event {self.path}", problems)
                        event = {"type": "ERROR", "object": failure(
                            500, "InternalError", "kubesim: a watch event failed OpenAPI "
                            "validation: " + "; ".join(problems))}
                    line = (json.dumps(event) + "\n").encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                pending = []
                with st.lock:
                    left = deadline - datetime.datetime.now().timestamp()
                    if left <= 0 or st.epoch != epoch:
                        break
                    if st.rv == cursor:
                        st.lock.wait(min(left, 1.0))
                    if st.epoch != epoch:
                        break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass
        self.close_connection = True


def check_file(validator, path):
    """`--check`: one line per JSON object of `path`; exit 1 if any is
    invalid or not covered."""
    bad = 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            if isinstance(obj, dict) and "object" in obj and "kind" not in obj:
                problems = validator.check_event(obj)
            else:
                problems = validator.check(obj)
            if problems is None:
                print("not covered")
            elif problems:
                print("invalid: " + "; ".join(problems))
            else:
                print("ok")
            bad += problems != []
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--client-ca")
    ap.add_argument("--tokens")
    ap.add_argument("--log")
    ap.add_argument("--openapi", help="validate every object sent against these schemas")
    ap.add_argument("--invalid-log", help="where validation failures are appended")
    ap.add_argument("--check", help="validate the objects of this file and exit")
    a = ap.parse_args()
    validator = None
    if a.openapi:
        from openapi_check import Validator
        validator = Validator(a.openapi)
    if a.check:
        if validator is None:
            ap.error("--check needs --openapi")
        return check_file(validator, a.check)
    for need in ("listen", "cert", "key", "client_ca", "tokens"):
        if getattr(a, need) is None:
            ap.error(f"--{need.replace('_', '-')} is required")
    with open(a.tokens) as f:
        tokens = json.load(f)
    Handler.api = Api(tokens, a.log, validator, a.invalid_log)
    host, port = a.listen.rsplit(":", 1)
    host = host.strip("[]")

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    srv = Server((host, int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.load_verify_locations(a.client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    print(f"READY {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
