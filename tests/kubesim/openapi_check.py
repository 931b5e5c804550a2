"""Hold the stand-in's objects to the Kubernetes OpenAPI v3 schemas.

`Validator(dir)` loads the trimmed upstream documents of `dir`
(tests/kubesim/openapi/, see its README) and checks an object in two
ways, both of which must pass:

* `jsonschema` (Draft 4 semantics, the JSON Schema OpenAPI 3.0 schema
  objects are a subset of) against the component the object's
  `apiVersion`/`kind` name, `$ref: #/components/schemas/...` resolved
  inside the same documents; `x-kubernetes-*` extensions are ignored (not
  JSON Schema keywords) and the formats the documents use are checked:
  `date-time` (RFC 3339), `byte` (base64), `int32`, `int64`;
* a walk that finds every field the schema does not name: the Kubernetes
  schemas allow unknown fields (no `additionalProperties: false`), so a
  misspelt field would otherwise pass. Only the schemas' free-form
  objects (FieldsV1, RawExtension, maps with `additionalProperties`) take
  any key.

A watch event is a WatchEvent whose `object` is checked by its own kind.
Kinds without a kept schema (only discovery documents and /version) are
reported as not covered (None), never as valid.
"""

import base64
import binascii
import datetime
import json
import re
from pathlib import Path

import jsonschema

CERTS = "io.k8s.api.certificates.v1."
CORE = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."

# (apiVersion, kind) -> component schema.
KINDS = {
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): CERTS + "CertificateSigningRequest",
    ("certificates.k8s.io/v1", "CertificateSigningRequestList"):
        CERTS + "CertificateSigningRequestList",
    ("v1", "Node"): CORE + "Node",
    ("v1", "NodeList"): CORE + "NodeList",
    ("v1", "Secret"): CORE + "Secret",
    ("v1", "SecretList"): CORE + "SecretList",
    ("v1", "Namespace"): CORE + "Namespace",
    ("v1", "NamespaceList"): CORE + "NamespaceList",
    ("v1", "ServiceAccount"): CORE + "ServiceAccount",
    ("v1", "ServiceAccountList"): CORE + "ServiceAccountList",
    ("v1", "Status"): META + "Status",
}
KINDS.update({("rbac.authorization.k8s.io/v1", k): "io.k8s.api.rbac.v1." + k
              for k in ("ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
                        "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
                        "RoleBindingList")})

RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def is_date_time(value):
    if not isinstance(value, str):
        return True
    if not RFC3339.match(value):
        return False
    datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


def is_byte(value):
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def in_range(bits):
    def check(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return True
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return check


def format_checker():
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time", raises=ValueError)(is_date_time)
    checker.checks("byte")(is_byte)
    checker.checks("int32")(in_range(32))
    checker.checks("int64")(in_range(64))
    return checker


class Validator:
    def __init__(self, directory):
        self.schemas = {}
        for f in sorted(Path(directory).glob("*.json")):
            doc = json.loads(f.read_text())
            if "components" in doc:
                self.schemas.update(doc["components"]["schemas"])
        self.checker = format_checker()

    def schema_name(self, obj):
        if not isinstance(obj, dict):
            return None
        return KINDS.get((obj.get("apiVersion"), obj.get("kind")))

    def check(self, obj):
        """The problems of one object (a list, empty when valid), or None
        when no kept schema covers its kind."""
        name = self.schema_name(obj)
        if name is None:
            return None
        return self.check_as(obj, name)

    def check_event(self, event):
        """The problems of one watch event (the WatchEvent, then its
        object), or None when no kept schema covers the object's kind."""
        inner = self.check(event.get("object") if isinstance(event, dict) else None)
        if inner is None:
            return None
        return self.check_as(event, META + "WatchEvent") + [f"object.{p}" for p in inner]

    def check_as(self, obj, name):
        root = {"$ref": f"#/components/schemas/{name}",
                "components": {"schemas": self.schemas}}
        v = jsonschema.Draft4Validator(root, format_checker=self.checker)
        problems = [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                    for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.path)))]
        self.unknown_fields(obj, {"$ref": f"#/components/schemas/{name}"}, "", problems)
        return problems

    def unknown(self, obj, prune=False):
        """The fields of `obj` its kind's schema does not name (the server's
        strict field validation), removed from `obj` when `prune` (what the
        server does otherwise); None when no kept schema covers the kind."""
        name = self.schema_name(obj)
        if name is None:
            return None
        found = []
        self.unknown_fields(obj, {"$ref": f"#/components/schemas/{name}"}, "", found, prune)
        return [f.split(":", 1)[0] for f in found]

    def resolve(self, schema):
        """`schema` with its `$ref` and `allOf` members merged in."""
        out = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
        parts = list(schema.get("allOf", []))
        if "$ref" in schema:
            parts.append(self.schemas[schema["$ref"].rsplit("/", 1)[1]])
        for part in parts:
            for k, v in self.resolve(part).items():
                out.setdefault(k, v)
        return out

    def unknown_fields(self, inst, schema, path, problems, prune=False):
        s = self.resolve(schema)
        if isinstance(inst, dict):
            props = s.get("properties")
            extra = s.get("additionalProperties")
            for k, v in list(inst.items()):
                where = f"{path}.{k}" if path else k
                if props is not None and k in props:
                    self.unknown_fields(v, props[k], where, problems, prune)
                elif isinstance(extra, dict):
                    self.unknown_fields(v, extra, where, problems, prune)
                elif props is not None or extra is False:
                    problems.append(f"{where}: field not in the schema")
                    if prune:
                        del inst[k]
        elif isinstance(inst, list) and isinstance(s.get("items"), dict):
            for i, v in enumerate(inst):
                self.unknown_fields(v, s["items"], f"{path}[{i}]", problems, prune)

    def document(self, paths):
        """An OpenAPI v3 document with `paths` and every kept schema (what
        GET /openapi/v3/<group-version> serves)."""
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "unversioned"},
                "paths": paths, "components": {"schemas": self.schemas}}
