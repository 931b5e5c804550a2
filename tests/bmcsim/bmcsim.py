#!/usr/bin/env python3
"""bmcsim: a test BMC that serves a recorded Redfish tree with each vendor's quirks.

Python 3.11 standard library only. It serves a DMTF Mockup-Creator tree
(tests/fixtures/redfish/<vendor>/redfish/v1/**/index.json) over HTTPS with
HTTP Basic auth, keeps the state a boot flow changes in memory (power, boot
override, virtual media slots, ETags, resets, what the host booted from) and
applies the rules of the vendor named by --vendor, each documented below with
its public source. It exists so that the appliance's Redfish driver can be
tested, end to end through the real CLI, against BMCs as they really behave.

Usage
-----
    python3 tests/bmcsim/bmcsim.py --tree DIR --vendor dell|hpe|lenovo|supermicro
        [--openbmc-rules] --listen 127.0.0.1:0 --cert C --key K
        --user U --password P --log FILE [--fault SPEC ...]
        [--initial-power On|Off] [--foreign-image URL]

`--tree` is the vendor's directory (the one holding `redfish/`). Once
listening it prints `READY <port>` on stdout (and flushes). It runs until
killed.

Observability
-------------
* `--log FILE`: one JSON object per line per Redfish request:
  {"method", "path", "body" (parsed JSON or null), "status"} plus, when a
  vendor rule or an injected fault decided the answer, "rule": "<name>".
* `GET /_sim/state` (no auth, never logged, never faulted) answers
  {"power": "On"|"Off",
   "boot": {"enabled", "target", "mode"},          # the system's, effective
   "pending_boot": {...} | null,                    # @Redfish.Settings, applied at next reset
   "slots": {"<slot @odata.id>": {"image", "inserted"}},
   "resets": ["<ResetType>", ...],                  # every accepted reset action
   "booted_from": ["<image url>" | "disk" | "pxe", ...],   # one per simulated boot
   "boots": [{"source", "target", "enabled", "mode", "reset"}],
   "requests": N,                                   # Redfish requests served (all statuses)
   "in_post": bool, "vendor": "...", "openbmc": bool}

Simulated boot: a reset or power-on that starts the host evaluates the boot
override. With `BootSourceOverrideEnabled` Once or Continuous and the target
the vendor's virtual-CD target (`Cd`; `UsbCd` on Supermicro) while a
CD-capable slot (MediaTypes contain CD or DVD) holds an inserted image, the
host boots that image (`booted_from: <url>`); any other case boots the disk
(`Pxe` records "pxe"). A Once override is then cleared (Enabled Disabled,
target None), as BMCs do after the boot it applied to.

Faults (`--fault SPEC`, repeatable)
-----------------------------------
    SPEC  := OP "=" KIND [ "x" COUNT ] [ "+" SKIP ]
    OP    := any | get | patch | post | insert | eject | boot | reset | auth
    KIND  := STATUS [ ":" SAMPLE ] | post400 | sys446 | drop | hostile
    STATUS:= a 3-digit HTTP status
    SAMPLE:= a file name (without .json) in the sushy error samples
             (tests/fixtures/redfish/sushy-errors/), used as the body
    COUNT := how many matching requests get the fault (default: all, forever)
    SKIP  := how many matching requests pass untouched first (default 0)

`insert` is an InsertMedia action or a slot PATCH that inserts; `eject` the
EjectMedia action or a slot PATCH that ejects; `boot` a PATCH of the system
or its settings object that carries `Boot`; `reset` the ComputerSystem.Reset
action; `auth` answers every authenticated request with KIND (401/403) even
with the right credentials. `post400` is HPE's 400
iLO.2.14.UnableToModifyDuringSystemPOST body, `sys446` Dell's 500
IDRAC.2.8.SYS446 body, `drop` closes the connection without an answer,
`hostile` a 500 whose message is 2 MB with newlines and a forged log line
(the audit's fakebmc.py errmsg, issue #40 item 8); a
numeric KIND answers that status with a Redfish error body (or the SAMPLE
body). A faulted request
changes nothing. Examples: `insert=500x1` (first insert 500), `boot=post400x1`,
`any=500` (every request 500 forever), `reset=409x1`, `auth=401`,
`insert=503x1+1` (the second insert 503),
`reset=500:error_single_ext_infox1` (an `@Message.ExtendedInfo` that is a
single object, not an array).

Other options
-------------
* `--require-insert-param NAME` (repeatable): an InsertMedia action without
  NAME is answered 400 with sushy's recorded body for that case
  (TransferProtocolType: transfer_proto_required_error3.json, TransferMethod:
  transfer_method_required_error.json, UserName/Password:
  credentials_required_error.json), as the BMCs sushy's `insert_media`
  retries for do.
* `--fetch-images`: an accepted insert first GETs the image, as a BMC does
  when it attaches an http(s) image; a failed fetch (connection, status not
  2xx) refuses the insert with 400 CouldNotEstablishConnection. Only
  loopback addresses are fetched (anything else is refused unfetched); TLS
  certificates are not verified (Lenovo's slots record
  `VerifyCertificate: false`); no proxy is used. The state gains
  `fetches: [{"url", "status", "bytes", "sha256"} | {"url", "error"}]`.
  The simulator answers nothing else while it fetches.
* `--errors DIR`: the sushy error samples (default
  tests/fixtures/redfish/sushy-errors next to this file's tests/ directory).
  A 401 is answered with session_error.json.

Vendor rules (each with its public source)
------------------------------------------
All vendors:
* Service root (/redfish, /redfish/v1) answers without auth, everything else
  needs Basic auth: 401 + WWW-Authenticate otherwise (DMTF DSP0266 §
  "Service root ... shall not require authentication").
* GET answers an `ETag` header (the resource's `@odata.etag` is refreshed
  where the record has one) and an `Allow` header; `If-Match` that does not
  match the current ETag (or `*`) is answered 412 PreconditionFailed. sushy's
  VirtualMedia decides between the InsertMedia action and a PATCH from the
  `Allow` header (openstack/sushy sushy/resources/manager/virtual_media.py
  `_allow_patch`), and both sushy (`_etag_handler` in sushy/connector.py) and
  Ansible community.general (plugins/module_utils/_redfish_utils.py
  `patch_request`) send If-Match with the ETag of a GET before a PATCH.
* Insert into an occupied slot: 409 ResourceInUse (simulator choice; drivers
  eject first, like Ansible `virtual_media_insert`).
* Boot PATCH values are checked against the system's
  `BootSourceOverrideTarget@Redfish.AllowableValues` (400 PropertyValueNotInList).
* Reset types are checked against `ResetType@Redfish.AllowableValues` or
  the action's ActionInfo (400 ActionParameterNotSupported).
* `@Redfish.Settings`: where the system names a SettingsObject (Lenovo's
  /redfish/v1/Systems/1/Pending) the object is served (synthesised from the
  system when the record lacks it) and a PATCH of its Boot is applied at the
  next reset; sushy (sushy/resources/system/system.py
  `set_system_boot_options`) and Ansible (`set_boot_override_with_settings_uri`)
  PATCH the settings object. A PATCH of the system itself applies at once.

Dell iDRAC9 (--vendor dell):
* An insert right after an eject of the same slot (within 30 s, the first
  insert after that eject) is answered 500 IDRAC.2.8.SYS446 once; the next
  insert succeeds. Source: microsoft/lisa
  lisa/sut_orchestrator/baremetal/cluster/idrac.py (`_reset_if_idrac_error`
  treats IDRAC.2.8.SYS446 as a transient internal error, and
  `_insert_virtual_media` sleeps after ejecting "to let iDRAC drop any stale
  handles" then retries the insert).

HPE iLO 5 (--vendor hpe):
* After a reset/power-on the host is in POST: the first Boot PATCH is
  answered 400 iLO.2.14.UnableToModifyDuringSystemPOST (which ends the
  simulated POST). Sources: openstack/ironic
  ironic/drivers/modules/redfish/management.py `_is_during_post_error`
  ("HPE iLO BMCs reject boot device changes while the system is in POST");
  message text from HPE's iLO 5 message registry
  (HPEDevCom/redfishdocs docs/redfishServices/ilos/ilo5/*/ilo5_msgregs*.md).
* An action POSTed with an empty body is answered 415 Unsupported Media
  Type. Source: openstack/sushy sushy/resources/manager/virtual_media.py
  `eject_media` ("Some vendors like HPE iLO has this kind of implementation.
  It needs to pass an empty dict.").
* Slot 1 is Floppy/USBStick (from the record): it never boots as a CD.
* A Boot PATCH that changes BootSourceOverrideMode is refused (400
  PropertyNotWritable). Source: openstack/ironic
  ironic/drivers/modules/redfish/management.py `set_boot_device` (boot mode
  is synced only on Supermicro: "other vendor implementations will result in
  an error", storyboard story 2008712).
* Successful PATCHes and actions answer 200 with iLO's
  `{"error": {"code": "iLO.0.10.ExtendedInfo", ... Base.1.4.Success}}` body.

Lenovo XCC (--vendor lenovo):
* Virtual media slots have no InsertMedia/EjectMedia actions (from the
  record): insert/eject is a PATCH of the slot ({"Image", "Inserted",
  "WriteProtected"} / {"Image": null, "Inserted": false}); a POST to an
  .../Actions/VirtualMedia.InsertMedia URL is 404. Source: openstack/sushy
  virtual_media.py `insert_media` ("some BMCs (e.g. Lenovo SD530 which is
  using PATCH method as opposed to InsertMedia action) will not attach
  vMedia if Inserted is not specified").
* Every PATCH needs If-Match: 428 PreconditionRequired without it. Sources:
  sushy virtual_media.py (PATCH with If-Match from the slot's ETag) and
  Ansible `patch_request`.
* RDOC* and Remote* slots cannot be inserted into: 400. Source: Ansible
  community.general _redfish_utils.py `_find_empty_virt_media_slot`
  ("filter out slot RDOC1/2 and Remote1/2/3/4 which are not supported to
  Insert/Eject").
* PATCH without `Inserted: true` leaves the slot empty (sushy comment above).

Supermicro X13 (--vendor supermicro):
* The virtual CD boots as `UsbCd`; `Cd` is the physical drive, so an
  override to `Cd` boots the disk even with an image inserted. Source:
  openstack/sushy sushy/resources/system/constants.py `USB_CD` ("only
  selecting UsbCd as the boot source results in a successful boot from
  vMedia. If CD is selected, boot fails even if vMedia is inserted").
* A Boot PATCH that omits BootSourceOverrideMode reverts the mode to
  `Legacy`. Source: openstack/ironic management.py `set_boot_device`
  ("Some BMCs reset it to default (BIOS) when changing the boot device";
  synced on Supermicro only).
* InsertMedia parameters not listed in the slot's ActionInfo are refused
  (400 ActionParameterNotSupported). Source: sushy virtual_media.py
  `insert_media` ("SuperMicro X11 will return an error if Inserted or
  WriteProtected are specified"); the recorded X13 ActionInfo lists them.
* The recorded slots have no EjectMedia action; the simulator offers one
  while the slot holds an image and accepts a POST to
  .../Actions/VirtualMedia.EjectMedia. (Simulator choice without a source:
  the record was captured with empty slots.)

Sessions (all vendors): POST /redfish/v1/SessionService/Sessions with
{"UserName", "Password"} (no auth needed; an `auth` fault applies) answers
201 with `X-Auth-Token` and `Location`; the token authenticates like Basic
until a DELETE of that Location. The state gains `sessions: {"created",
"deleted", "open"}`. The log shows the Password as "<redacted>". (DSP0266
"Redfish session login authentication".)

Strict variant (--strict, on top of any vendor; issue #41): every behaviour
the schema and RFC 9110 allow that the recorded BMCs do not show, at once:
* no slot has `MediaTypes`: a CD-capable slot with an InsertMedia action
  gets an ActionInfo (its own, or the recorded one extended) whose
  `MediaType` parameter allows the recorded types; one without the action
  (Lenovo) is named "Virtual CD/DVD <Id>";
* every ETag is weak (`W/"…"`), If-Match is required on every PATCH (428)
  and compared strongly (RFC 9110 §13.1.1): only `*` matches (412);
* InsertMedia without TransferProtocolType is refused (as
  --require-insert-param TransferProtocolType);
* a Boot PATCH without BootSourceOverrideMode (or Target, or Enabled) is
  refused: 400 PropertyMissing;
* Basic auth is refused (401): a Redfish session is required.

OpenBMC rule set (--openbmc-rules, on top of any tree):
* Insert accepts only https:// and smb:// Image URLs: any other scheme is
  400 ResourceAtUriInUnknownFormat, whatever TransferProtocolType says;
  TransferProtocolType must be HTTPS or CIFS (400 PropertyValueNotInList)
  and match the URL's scheme; TransferMethod, if given, must be Stream
  (400 ActionParameterNotSupported); Inserted, if given, must be true. An
  inserted slot reports TransferMethod "Stream". Source: openbmc/bmcweb
  redfish-core/lib/virtual_media.hpp `validateParams`,
  `getTransferProtocolFromUri`.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import http.server
import ipaddress
import json
import os
import re
import secrets
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

BASE = "Base.1.12"
SESSIONS = "/redfish/v1/SessionService/Sessions"
VENDORS = ("dell", "hpe", "lenovo", "supermicro")
DELL_EJECT_WINDOW = 30.0
CD_TYPES = {"CD", "DVD"}


# --------------------------------------------------------------------------
# Error bodies
# --------------------------------------------------------------------------


def message(msg_id, text, args=(), related=(), severity="Warning", resolution=""):
    m = {
        "@odata.type": "#Message.v1_1_1.Message",
        "MessageId": msg_id,
        "Message": text,
        "MessageArgs": list(args),
        "Severity": severity,
        "Resolution": resolution or "Correct the request and resubmit.",
    }
    if related:
        m["RelatedProperties"] = list(related)
    return m


def error_body(msg):
    """The Redfish error envelope (DSP0266 'Error responses')."""
    return {
        "error": {
            "code": msg["MessageId"],
            "message": msg["Message"],
            "@Message.ExtendedInfo": [msg],
        }
    }


def base_error(name, text, args=(), related=()):
    return error_body(message(f"{BASE}.{name}", text, args, related, "Critical"))


def status_error(status):
    """Generic body for an injected numeric fault."""
    names = {
        400: ("GeneralError", "A general error has occurred."),
        401: ("NoValidSession", "There is no valid session established with the implementation."),
        403: ("InsufficientPrivilege", "There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation."),
        404: ("ResourceNotFound", "The requested resource was not found."),
        409: ("ResourceInUse", "The change to the requested resource failed because the resource is in use or in transition."),
        412: ("PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource."),
        503: ("ServiceTemporarilyUnavailable", "The service is temporarily unavailable.  Retry in 5 seconds."),
    }
    name, text = names.get(
        status,
        ("InternalError", "The request failed due to an internal service error.  The service is still operational."),
    )
    return base_error(name, text)


def hpe_post_error(prop="Boot"):
    # iLO 5 message registry: iLO.{version}.UnableToModifyDuringSystemPOST.
    return {
        "error": {
            "code": "iLO.0.10.ExtendedInfo",
            "message": "See @Message.ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [
                {
                    "MessageArgs": [prop],
                    "MessageId": "iLO.2.14.UnableToModifyDuringSystemPOST",
                }
            ],
        }
    }


def hpe_success():
    return {
        "error": {
            "code": "iLO.0.10.ExtendedInfo",
            "message": "See @Message.ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [{"MessageId": "Base.1.4.Success"}],
        }
    }


def dell_sys446():
    return error_body(
        message(
            "IDRAC.2.8.SYS446",
            "Unable to complete the operation because of an internal error.",
            severity="Critical",
            resolution="Retry the operation. If the issue persists, reset the iDRAC.",
        )
    )


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------

FAULT_RE = re.compile(
    r"^(?P<op>any|get|patch|post|insert|eject|boot|reset|auth)="
    r"(?P<kind>\d{3}(?::[A-Za-z0-9_]+?)?|post400|sys446|drop|hostile)(?:x(?P<count>\d+))?(?:\+(?P<skip>\d+))?$"
)


class Fault:
    def __init__(self, spec, samples):
        m = FAULT_RE.match(spec)
        if not m:
            raise ValueError(f"bad --fault {spec!r} (see the grammar at the top of bmcsim.py)")
        self.spec = spec
        self.op = m["op"]
        self.kind = m["kind"]
        self.left = int(m["count"]) if m["count"] is not None else None
        self.skip = int(m["skip"] or 0)
        self.sample = None
        if ":" in self.kind:
            self.kind, name = self.kind.split(":", 1)
            self.sample = samples.get(name)
            if self.sample is None:
                raise ValueError(f"--fault {spec!r}: no error sample {name!r}")

    def fire(self, ops):
        """True when this fault answers a request classified as `ops`."""
        if self.op not in ops:
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.left is None:
            return True
        if self.left > 0:
            self.left -= 1
            return True
        return False

    def answer(self):
        if self.kind == "post400":
            return 400, hpe_post_error()
        if self.kind == "sys446":
            return 500, dell_sys446()
        if self.kind == "drop":
            return None, None
        if self.kind == "hostile":
            forged = "2026-11-28T00:00:00.000000Z  INFO crc_appliance: FORGED LOG LINE"
            m = f"boom\n{forged}\r\n\x1b[2J" + "B" * (2 << 20)
            return 500, {"error": {"code": f"{BASE}.GeneralError", "message": m}}
        status = int(self.kind)
        return status, copy.deepcopy(self.sample) if self.sample else status_error(status)


# --------------------------------------------------------------------------
# The simulated BMC
# --------------------------------------------------------------------------


class Reply:
    def __init__(self, status, body=None, headers=None, rule=None):
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.rule = rule


def norm_path(raw):
    path = urllib.parse.urlsplit(raw).path
    path = re.sub(r"/+", "/", path)
    if len(path) > 1:
        path = path.rstrip("/")
    return path


def load_tree(tree):
    root = os.path.join(tree, "redfish")
    if not os.path.isdir(root):
        raise SystemExit(f"bmcsim: {tree}: no redfish/ directory")
    res = {}
    for d, _dirs, files in os.walk(root):
        if "index.json" in files:
            rel = os.path.relpath(d, tree).replace(os.sep, "/")
            with open(os.path.join(d, "index.json"), encoding="utf-8") as f:
                res["/" + rel] = json.load(f)
    return res


def load_samples(d):
    """The sushy error samples by name (without .json); {} when absent."""
    out = {}
    if d and os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    out[f[:-5]] = json.load(fh)
    return out


DEFAULT_ERRORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "redfish", "sushy-errors")


FETCH_LIMIT = 1 << 30


def fetch_image(url):
    """GET `url` as a BMC attaching it would: {url, status, bytes, sha256} or
    {url, error}. Loopback addresses only (the tests' network rule)."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    try:
        ip = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError:
        return {"url": url, "error": f"{host!r} is not a loopback address (not fetched)"}
    if not ip.is_loopback:
        return {"url": url, "error": f"{host} is not a loopback address (not fetched)"}
    if u.scheme not in ("http", "https"):
        return {"url": url, "error": f"scheme {u.scheme!r} is not fetched"}
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    h = hashlib.sha256()
    n = 0
    try:
        with opener.open(urllib.request.Request(url, headers={"User-Agent": "bmcsim"}), timeout=20) as r:
            status = r.status
            while n <= FETCH_LIMIT:
                chunk = r.read(1 << 16)
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
    except urllib.error.HTTPError as e:
        return {"url": url, "status": e.code, "error": f"HTTP {e.code}"}
    except (OSError, ValueError) as e:
        return {"url": url, "error": str(e)}
    return {"url": url, "status": status, "bytes": n, "sha256": h.hexdigest()}


def etag_of(obj):
    clean = {k: v for k, v in obj.items() if k != "@odata.etag"}
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


def strip_weak(tag):
    tag = tag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    return tag.strip('"')


def scheme_protocol(url):
    s = urllib.parse.urlsplit(url).scheme.lower()
    return {"http": "HTTP", "https": "HTTPS", "nfs": "NFS", "smb": "CIFS", "cifs": "CIFS"}.get(s)


class Sim:
    def __init__(self, args):
        self.vendor = args.vendor
        self.openbmc = args.openbmc_rules
        self.user = args.user
        self.password = args.password
        self.samples = load_samples(args.errors)
        self.faults = [Fault(s, self.samples) for s in args.fault or []]
        self.strict = args.strict
        self.require_params = list(args.require_insert_param or [])
        if self.strict and "TransferProtocolType" not in self.require_params:
            self.require_params.append("TransferProtocolType")
        self.sessions = {}  # token -> session path
        self.session_counts = {"created": 0, "deleted": 0}
        self.fetch = args.fetch_images
        self.fetches = []
        self.res = load_tree(args.tree)
        self.lock = threading.Lock()
        self.requests = 0
        self.resets = []
        self.booted_from = []
        self.boots = []
        self.in_post = False
        self.last_eject = {}  # slot path -> time of its last eject (Dell rule)
        self.pending = None  # Boot dict PATCHed to the settings object
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None

        systems = self.res.get("/redfish/v1/Systems", {}).get("Members", [])
        if not systems:
            raise SystemExit("bmcsim: the tree has no system")
        self.system_path = systems[0]["@odata.id"].rstrip("/")
        sysobj = self.system()
        if args.initial_power:
            sysobj["PowerState"] = args.initial_power
        sysobj.setdefault("Boot", {})
        self.settings_path = None
        st = sysobj.get("@Redfish.Settings", {}).get("SettingsObject", {}).get("@odata.id")
        if st:
            self.settings_path = st.rstrip("/")
            if self.settings_path not in self.res:
                self.res[self.settings_path] = {
                    "@odata.id": self.settings_path,
                    "@odata.type": sysobj.get("@odata.type", "#ComputerSystem.v1_0_0.ComputerSystem"),
                    "Id": self.settings_path.rsplit("/", 1)[-1],
                    "Name": "Pending settings",
                    "Boot": {},
                }
        self.slots = self.find_slots()
        self.cd_slots = {s for s in self.slots if CD_TYPES & set(self.res[s].get("MediaTypes") or [])}
        if self.strict:
            self.strict_slots()
        # action target -> (resource path, action name)
        self.actions = {}
        for path, obj in self.res.items():
            for name, act in (obj.get("Actions") or {}).items():
                if isinstance(act, dict) and "target" in act:
                    self.actions[act["target"].rstrip("/")] = (path, name)
        if self.vendor == "supermicro":
            for s in self.slots:
                self.actions[s + "/Actions/VirtualMedia.EjectMedia"] = (s, "#VirtualMedia.EjectMedia")
        if args.foreign_image:
            slot = next((s for s in self.slots if self.insertable(s) and self.cd_capable(s)), None)
            if slot is None:
                raise SystemExit("bmcsim: no CD-capable slot for --foreign-image")
            self.apply_insert(slot, args.foreign_image, {})

    # ---- tree helpers ----------------------------------------------------

    def system(self):
        return self.res[self.system_path]

    def find_slots(self):
        colls = []
        vm = self.system().get("VirtualMedia", {}).get("@odata.id")
        if vm:
            colls.append(vm.rstrip("/"))
        for m in self.system().get("Links", {}).get("ManagedBy", []):
            mgr = self.res.get(m["@odata.id"].rstrip("/"), {})
            vm = mgr.get("VirtualMedia", {}).get("@odata.id")
            if vm and vm.rstrip("/") not in colls:
                colls.append(vm.rstrip("/"))
        slots = []
        for c in colls:
            for m in self.res.get(c, {}).get("Members", []):
                p = m["@odata.id"].rstrip("/")
                if p in self.res and p not in slots:
                    slots.append(p)
        return slots

    def cd_capable(self, slot):
        return slot in self.cd_slots

    def strict_slots(self):
        """--strict: no MediaTypes; what a slot takes is in its InsertMedia
        ActionInfo (`MediaType`), or (no action) in its name."""
        for s in self.slots:
            o = self.res[s]
            types = o.pop("MediaTypes", None) or []
            act = (o.get("Actions") or {}).get("#VirtualMedia.InsertMedia")
            if act is None:
                if s in self.cd_slots:
                    o["Name"] = f"Virtual CD/DVD {o.get('Id', '')}".strip()
                continue
            info_path = (act.get("@Redfish.ActionInfo") or s + "/InsertMediaActionInfo").rstrip("/")
            info = self.res.setdefault(info_path, {
                "@odata.type": "#ActionInfo.v1_1_2.ActionInfo",
                "@odata.id": info_path,
                "Id": "InsertMediaActionInfo",
                "Name": "Insert Media Action Info",
                "Parameters": [{"Name": "Image", "Required": True, "DataType": "String"}],
            })
            info.setdefault("Parameters", []).append(
                {"Name": "MediaType", "Required": False, "DataType": "String", "AllowableValues": types}
            )
            act["@Redfish.ActionInfo"] = info_path

    def insertable(self, slot):
        if self.vendor == "lenovo":
            sid = slot.rsplit("/", 1)[-1]
            if sid.startswith("RDOC") or sid.startswith("Remote"):
                return False
        return True

    def patchable_slot(self, slot):
        acts = self.res[slot].get("Actions") or {}
        return "#VirtualMedia.InsertMedia" not in acts

    def changed(self, path):
        """Hook for a state change of `path` (ETags are derived from content)."""

    def allow(self, path):
        if path == self.system_path or path == self.settings_path:
            return "GET, PATCH"
        if path in self.slots and self.patchable_slot(path):
            return "GET, PATCH"
        return "GET"

    def view(self, path):
        """(resource as served, its ETag): slots with their dynamic actions,
        the settings object with the pending values; the ETag is a hash of
        that content, weak where the record's @odata.etag is weak."""
        obj = copy.deepcopy(self.res[path])
        if path == self.settings_path:
            boot = {}
            sb = self.system().get("Boot", {})
            for k in ("BootSourceOverrideEnabled", "BootSourceOverrideTarget", "BootSourceOverrideMode"):
                if k in sb:
                    boot[k] = sb[k]
            boot.update(self.pending or {})
            obj["Boot"] = boot
        if self.vendor == "supermicro" and path in self.slots and obj.get("Inserted"):
            obj.setdefault("Actions", {})["#VirtualMedia.EjectMedia"] = {
                "target": path + "/Actions/VirtualMedia.EjectMedia"
            }
        tag = etag_of(obj)
        weak = self.strict or str(obj.get("@odata.etag", "")).startswith("W/")
        tag = f'W/"{tag}"' if weak else f'"{tag}"'
        if "@odata.etag" in obj:
            obj["@odata.etag"] = tag
        return obj, tag

    # ---- state -----------------------------------------------------------

    def state(self):
        sb = self.system().get("Boot", {})
        slots = {}
        for s in self.slots:
            o = self.res[s]
            slots[s] = {"image": o.get("Image") or None, "inserted": bool(o.get("Inserted"))}
        return {
            "power": self.system().get("PowerState"),
            "boot": {
                "enabled": sb.get("BootSourceOverrideEnabled"),
                "target": sb.get("BootSourceOverrideTarget"),
                "mode": sb.get("BootSourceOverrideMode"),
            },
            "pending_boot": self.pending,
            "slots": slots,
            "resets": list(self.resets),
            "booted_from": list(self.booted_from),
            "boots": list(self.boots),
            "requests": self.requests,
            "in_post": self.in_post,
            "vendor": self.vendor,
            "openbmc": self.openbmc,
            "fetches": list(self.fetches),
            "sessions": {**self.session_counts, "open": len(self.sessions)},
            "strict": self.strict,
        }

    # ---- request dispatch ------------------------------------------------

    def authorized(self, headers):
        token = headers.get("X-Auth-Token")
        if token:
            return token in self.sessions
        header = headers.get("Authorization")
        if self.strict or not header or not header.startswith("Basic "):
            return False
        try:
            raw = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        user, _, pw = raw.partition(":")
        return user == self.user and pw == self.password

    def classify(self, method, path, body):
        """The fault ops a request belongs to."""
        ops = {"any", method.lower()}
        if method == "POST":
            _res, name = self.actions.get(path, (None, ""))
            if name.endswith("VirtualMedia.InsertMedia") or path.endswith("VirtualMedia.InsertMedia"):
                ops.add("insert")
            elif name.endswith("VirtualMedia.EjectMedia") or path.endswith("VirtualMedia.EjectMedia"):
                ops.add("eject")
            elif name == "#ComputerSystem.Reset":
                ops.add("reset")
        elif method == "PATCH" and isinstance(body, dict):
            if path in self.slots:
                if body.get("Image") or body.get("Inserted") is True:
                    ops.add("insert")
                elif "Image" in body or body.get("Inserted") is False:
                    ops.add("eject")
            elif path in (self.system_path, self.settings_path) and "Boot" in body:
                ops.add("boot")
        return ops

    def handle(self, method, path, headers, raw_body):
        """Serve one Redfish request (lock held). Returns a Reply."""
        self.requests += 1
        body = None
        bad_json = False
        if raw_body:
            try:
                body = json.loads(raw_body)
            except (ValueError, UnicodeDecodeError):
                bad_json = True
        login = method == "POST" and path == SESSIONS
        open_path = path in ("/redfish", "/redfish/v1")
        authed = self.authorized(headers)
        if login:
            for f in self.faults:
                if f.op == "auth" and f.fire({"auth"}):
                    st, b = f.answer()
                    return Reply(st, b, rule=f"fault {f.spec}")
            return self.login(body)
        ops = self.classify(method, path, body)
        if not open_path:
            for f in self.faults:
                if f.op == "auth" and f.fire({"auth"}):
                    st, b = f.answer()
                    return Reply(st, b, {"WWW-Authenticate": 'Basic realm="bmcsim"'}, f"fault {f.spec}")
            if not authed:
                return Reply(
                    401,
                    copy.deepcopy(self.samples.get("session_error"))
                    or base_error("NoValidSession", "There is no valid session established with the implementation."),
                    {"WWW-Authenticate": 'Basic realm="bmcsim"'},
                    "auth",
                )
        for f in self.faults:
            if f.op != "auth" and f.fire(ops):
                st, b = f.answer()
                return Reply(st, b, rule=f"fault {f.spec}")
        if bad_json:
            return Reply(400, base_error("MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service."))
        if method == "GET":
            return self.get(path)
        if method == "PATCH":
            return self.patch(path, headers, body)
        if method == "POST":
            return self.post(path, body, raw_body)
        if method == "DELETE" and path in self.sessions.values():
            token = next(t for t, p in self.sessions.items() if p == path)
            del self.sessions[token]
            self.session_counts["deleted"] += 1
            return Reply(204)
        return Reply(405, base_error("OperationNotAllowed", f"The HTTP method {method} is not allowed on {path}."), {"Allow": self.allow(path) if path in self.res else "GET"})

    def login(self, body):
        """POST to the sessions collection: a token for the right user."""
        body = body if isinstance(body, dict) else {}
        if body.get("UserName") != self.user or body.get("Password") != self.password:
            return Reply(401, copy.deepcopy(self.samples.get("session_error")) or base_error("NoValidSession", "There is no valid session established with the implementation."), rule="session refused")
        self.session_counts["created"] += 1
        sid = str(self.session_counts["created"])
        path = f"{SESSIONS}/{sid}"
        token = secrets.token_hex(16)
        self.sessions[token] = path
        doc = {"@odata.id": path, "@odata.type": "#Session.v1_0_0.Session", "Id": sid, "Name": "User Session", "UserName": self.user}
        return Reply(201, doc, {"X-Auth-Token": token, "Location": path}, rule="session created")

    def get(self, path):
        if path == "/redfish":
            return Reply(200, {"v1": "/redfish/v1/"})
        if path not in self.res:
            return Reply(404, base_error("ResourceMissingAtURI", f"The resource at the URI {path} was not found.", [path]))
        obj, tag = self.view(path)
        return Reply(200, obj, {"ETag": tag, "Allow": self.allow(path)})

    def check_if_match(self, path, headers, required):
        im = headers.get("If-Match")
        if self.strict:
            # RFC 9110 13.1.1: If-Match uses the strong comparison, and a
            # weak entity tag never matches; only "*" does here.
            if im is None:
                return Reply(428, base_error("PreconditionRequired", "A precondition header or annotation is required to change the resource."), rule="strict: If-Match required")
            current = self.view(path)[1]
            tags = [t.strip() for t in im.split(",")]
            if "*" in tags or any(t == current and not t.startswith("W/") for t in tags):
                return None
            return Reply(412, base_error("PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource."), rule="strict: weak If-Match refused")
        if im is None:
            if required:
                return Reply(
                    428,
                    base_error("PreconditionRequired", "A precondition header or annotation is required to change the resource."),
                    rule=f"{self.vendor}: If-Match required",
                )
            return None
        current = strip_weak(self.view(path)[1])
        tags = [t.strip() for t in im.split(",")]
        if "*" in tags or any(strip_weak(t) == current for t in tags):
            return None
        return Reply(412, base_error("PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource."), rule="If-Match mismatch")

    def ok_patch(self, path):
        if self.vendor == "hpe":
            return Reply(200, hpe_success())
        obj, tag = self.view(path)
        return Reply(200, obj, {"ETag": tag})

    def ok_action(self):
        if self.vendor == "hpe":
            return Reply(200, hpe_success())
        return Reply(204)

    def patch(self, path, headers, body):
        if path not in self.res:
            return Reply(404, base_error("ResourceMissingAtURI", f"The resource at the URI {path} was not found.", [path]))
        allow = self.allow(path)
        if "PATCH" not in allow:
            return Reply(405, base_error("OperationNotAllowed", f"PATCH is not allowed on {path}."), {"Allow": allow})
        if not isinstance(body, dict):
            return Reply(400, base_error("MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service."))
        pre = self.check_if_match(path, headers, required=self.vendor == "lenovo")
        if pre:
            return pre
        if path in self.slots:
            return self.patch_slot(path, body)
        return self.patch_system(path, body)

    # ---- boot override -----------------------------------------------------

    def patch_system(self, path, body):
        sysobj = self.system()
        for k in body:
            if k not in ("Boot", "AssetTag", "IndicatorLED", "@odata.etag"):
                return Reply(400, base_error("PropertyNotWritable", f"The property {k} is a read only property and cannot be assigned a value.", [k], [f"#/{k}"]))
        boot = body.get("Boot")
        if boot is None:
            for k in ("AssetTag", "IndicatorLED"):
                if k in body:
                    sysobj[k] = body[k]
            self.changed(self.system_path)
            return self.ok_patch(path)
        if not isinstance(boot, dict):
            return Reply(400, base_error("PropertyValueTypeError", "The value for the property Boot is of a different type than the property can accept.", ["Boot"], ["#/Boot"]))
        if self.strict:
            for k in ("BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode"):
                if k not in boot:
                    return Reply(400, base_error("PropertyMissing", f"The property {k} is a required property and must be included in the request.", [k], [f"#/Boot/{k}"]), rule=f"strict: Boot PATCH without {k}")
        if self.vendor == "hpe" and self.in_post:
            # ironic redfish/management.py _is_during_post_error; iLO 5 registry.
            self.in_post = False
            return Reply(400, hpe_post_error("Boot"), rule="hpe: UnableToModifyDuringSystemPOST")
        sb = sysobj["Boot"]
        current = dict(sb)
        if path == self.settings_path:
            current.update(self.pending or {})
        err = self.validate_boot(boot, current)
        if err:
            return err
        new = {k: boot[k] for k in ("BootSourceOverrideEnabled", "BootSourceOverrideTarget", "BootSourceOverrideMode", "UefiTargetBootSourceOverride") if k in boot}
        rule = None
        if self.vendor == "supermicro" and "BootSourceOverrideMode" not in boot:
            # ironic management.py set_boot_device: "Some BMCs reset it to
            # default (BIOS) when changing the boot device" (Supermicro).
            new["BootSourceOverrideMode"] = "Legacy"
            rule = "supermicro: mode omitted, reverted to Legacy"
        if path == self.settings_path:
            self.pending = {**(self.pending or {}), **new}
        else:
            sb.update(new)
            self.changed(self.system_path)
        r = self.ok_patch(path)
        r.rule = rule
        return r

    def validate_boot(self, boot, current):
        allowed_targets = self.system()["Boot"].get("BootSourceOverrideTarget@Redfish.AllowableValues")
        allowed_enabled = self.system()["Boot"].get(
            "BootSourceOverrideEnabled@Redfish.AllowableValues", ["Disabled", "Once", "Continuous"]
        )
        for k, v in boot.items():
            if k == "BootSourceOverrideTarget" and allowed_targets is not None and v not in allowed_targets:
                return self.not_in_list(v, k)
            if k == "BootSourceOverrideEnabled" and v not in allowed_enabled:
                return self.not_in_list(v, k)
            if k == "BootSourceOverrideMode":
                if v not in ("UEFI", "Legacy"):
                    return self.not_in_list(v, k)
                if self.vendor == "hpe" and v != current.get("BootSourceOverrideMode"):
                    # ironic management.py set_boot_device, story 2008712.
                    r = Reply(400, base_error("PropertyNotWritable", f"The property {k} is a read only property and cannot be assigned a value.", [k], [f"#/Boot/{k}"]))
                    r.rule = "hpe: mode change refused"
                    return r
        return None

    @staticmethod
    def not_in_list(v, k):
        return Reply(400, base_error("PropertyValueNotInList", f"The value {v} for the property {k} is not in the list of acceptable values.", [str(v), k], [f"#/Boot/{k}"]))

    # ---- virtual media -----------------------------------------------------

    def patch_slot(self, slot, body):
        for k in body:
            if k not in ("Image", "Inserted", "WriteProtected", "TransferProtocolType", "TransferMethod", "UserName", "Password", "@odata.etag"):
                return Reply(400, base_error("PropertyNotWritable", f"The property {k} is a read only property and cannot be assigned a value.", [k], [f"#/{k}"]))
        image = body.get("Image")
        if image or body.get("Inserted") is True:
            if not self.insertable(slot):
                # Ansible _redfish_utils.py _find_empty_virt_media_slot.
                r = Reply(400, base_error("PropertyNotWritable", f"The property Image is a read only property and cannot be assigned a value on {slot}.", ["Image"], ["#/Image"]))
                r.rule = "lenovo: RDOC/Remote slot"
                return r
            if not image:
                return Reply(400, base_error("PropertyMissing", "The property Image is a required property and must be included in the request.", ["Image"], ["#/Image"]))
            params = {k: v for k, v in body.items() if k != "Image"}
            err = self.check_insert(slot, image, params, action=False)
            if err:
                return err
            if self.vendor == "lenovo" and body.get("Inserted") is not True:
                # sushy: Lenovo "will not attach vMedia if Inserted is not specified".
                self.res[slot]["Image"] = image
                self.changed(slot)
                r = self.ok_patch(slot)
                r.rule = "lenovo: Inserted not given, not attached"
                return r
            self.apply_insert(slot, image, params)
            return self.ok_patch(slot)
        if "Image" in body or body.get("Inserted") is False:
            self.apply_eject(slot)
            return self.ok_patch(slot)
        if "WriteProtected" in body:
            self.res[slot]["WriteProtected"] = body["WriteProtected"]
            self.changed(slot)
        return self.ok_patch(slot)

    def check_insert(self, slot, image, params, action):
        """Vendor rules for an insert; a Reply when refused."""
        if not isinstance(image, str):
            return Reply(400, base_error("ActionParameterValueTypeError", "The value for the parameter Image is of a different type than the parameter can accept.", [str(image), "Image"], ["#/Image"]))
        proto = params.get("TransferProtocolType")
        if self.openbmc:
            r = self.openbmc_check(image, params)
            if r:
                r.rule = "openbmc: " + (r.rule or "insert refused")
                return r
        elif scheme_protocol(image) is None:
            return Reply(400, base_error("ActionParameterValueFormatError", f"The value {image} for the parameter Image in the action InsertMedia is of a different format than the parameter can accept.", [image, "Image", "InsertMedia"], ["#/Image"]))
        elif proto is not None and proto != scheme_protocol(image):
            return Reply(400, base_error("ActionParameterValueConflict", f"The parameter TransferProtocolType with value {proto} conflicts with the Image {image}.", [proto, image], ["#/TransferProtocolType"]))
        if self.res[slot].get("Inserted"):
            r = Reply(409, base_error("ResourceInUse", "The change to the requested resource failed because the resource is in use or in transition."))
            r.rule = "slot occupied"
            return r
        if self.fetch:
            got = fetch_image(image)
            self.fetches.append(got)
            if "error" in got:
                r = Reply(400, base_error("CouldNotEstablishConnection", f"An attempt to access the resource/file/image at URI {image} was unsuccessful because a connection could not be established: {got['error']}.", [image]))
                r.rule = "fetch failed"
                return r
        if self.vendor == "dell":
            t = self.last_eject.pop(slot, None)
            if t is not None and time.monotonic() - t < DELL_EJECT_WINDOW:
                # microsoft/lisa baremetal/cluster/idrac.py: SYS446 is transient.
                r = Reply(500, dell_sys446())
                r.rule = "dell: SYS446 insert right after eject"
                return r
        return None

    def openbmc_check(self, image, params):
        # openbmc/bmcweb redfish-core/lib/virtual_media.hpp validateParams.
        if params.get("Inserted") is False:
            return Reply(400, base_error("ActionParameterNotSupported", "The parameter Inserted for the action InsertMedia is not supported on the target resource.", ["Inserted", "InsertMedia"]))
        tm = params.get("TransferMethod")
        if tm is not None and tm != "Stream":
            return Reply(400, base_error("ActionParameterNotSupported", "The parameter TransferMethod for the action InsertMedia is not supported on the target resource.", ["TransferMethod", "InsertMedia"]))
        scheme = urllib.parse.urlsplit(image).scheme.lower()
        uri_proto = {"https": "HTTPS", "smb": "CIFS"}.get(scheme, "invalid") if scheme else None
        tp = params.get("TransferProtocolType")
        param_proto = None if tp is None else ({"HTTPS": "HTTPS", "CIFS": "CIFS"}.get(tp, "invalid"))
        if uri_proto == "invalid":
            return Reply(400, base_error("ResourceAtUriInUnknownFormat", f"The resource at {image} is in a format not recognized by the service.", [image]), rule="ResourceAtUriInUnknownFormat")
        if param_proto == "invalid":
            return Reply(400, base_error("PropertyValueNotInList", f"The value {tp} for the property TransferProtocolType is not in the list of acceptable values.", [str(tp), "TransferProtocolType"]))
        if uri_proto is None and param_proto is None:
            return Reply(400, base_error("ResourceAtUriInUnknownFormat", f"The resource at {image} is in a format not recognized by the service.", [image]), rule="ResourceAtUriInUnknownFormat")
        if uri_proto and param_proto and uri_proto != param_proto:
            return Reply(400, base_error("ActionParameterValueTypeError", f"The value {tp} for the parameter TransferProtocolType in the action InsertMedia is of a different type than the parameter can accept.", [str(tp), "TransferProtocolType", "InsertMedia"]))
        return None

    def apply_insert(self, slot, image, params):
        o = self.res[slot]
        o["Image"] = image
        o["ImageName"] = urllib.parse.urlsplit(image).path.rsplit("/", 1)[-1] or None
        o["Inserted"] = True
        o["WriteProtected"] = params.get("WriteProtected", True)
        o["ConnectedVia"] = "URI"
        if "TransferProtocolType" in o or params.get("TransferProtocolType") or self.openbmc:
            o["TransferProtocolType"] = params.get("TransferProtocolType") or scheme_protocol(image)
        if self.openbmc:
            o["TransferMethod"] = "Stream"
        elif params.get("TransferMethod"):
            o["TransferMethod"] = params["TransferMethod"]
        self.changed(slot)

    def apply_eject(self, slot):
        o = self.res[slot]
        o["Image"] = None
        if "ImageName" in o:
            o["ImageName"] = None
        o["Inserted"] = False
        o["ConnectedVia"] = "NotConnected"
        if "TransferProtocolType" in o:
            o["TransferProtocolType"] = None
        if self.vendor == "dell":
            self.last_eject[slot] = time.monotonic()
        self.changed(slot)

    # ---- actions -------------------------------------------------------------

    def post(self, path, body, raw_body):
        target = self.actions.get(path)
        if target is None and path in self.res:
            return Reply(405, base_error("OperationNotAllowed", f"POST is not allowed on {path}."), {"Allow": self.allow(path)})
        if target is None:
            return Reply(404, base_error("ResourceMissingAtURI", f"The resource at the URI {path} was not found.", [path]))
        res_path, name = target
        if self.vendor == "hpe" and not (raw_body or b"").strip():
            # sushy virtual_media.py eject_media: iLO needs an empty dict.
            return Reply(415, base_error("UnsupportedMediaType", "The request specified a Content-Type header that is not supported.", ), rule="hpe: 415 on empty action body")
        params = body if isinstance(body, dict) else {}
        if name == "#ComputerSystem.Reset":
            return self.reset(res_path, params)
        if name.endswith("VirtualMedia.InsertMedia"):
            return self.insert_action(res_path, params)
        if name.endswith("VirtualMedia.EjectMedia"):
            self.apply_eject(res_path)
            return self.ok_action()
        return Reply(400, base_error("ActionNotSupported", f"The action {name} is not supported by the resource.", [name]))

    def insert_action(self, slot, params):
        image = params.get("Image")
        if not image:
            return Reply(400, base_error("ActionParameterMissing", "The action InsertMedia requires the parameter Image to be present in the request body.", ["InsertMedia", "Image"], ["#/Image"]))
        info = self.action_info(slot, "#VirtualMedia.InsertMedia")
        if info is not None and self.vendor == "supermicro":
            names = {p.get("Name") for p in info.get("Parameters", [])}
            for k in params:
                if k not in names:
                    r = Reply(400, base_error("ActionParameterNotSupported", f"The parameter {k} for the action InsertMedia is not supported on the target resource.", [k, "InsertMedia"], [f"#/{k}"]))
                    r.rule = "supermicro: parameter not in ActionInfo"
                    return r
        for name in self.require_params:
            if name not in params:
                return self.missing_param(name)
        rest = {k: v for k, v in params.items() if k != "Image"}
        err = self.check_insert(slot, image, rest, action=True)
        if err:
            return err
        self.apply_insert(slot, image, rest)
        return self.ok_action()

    def missing_param(self, name):
        sample = {
            "TransferProtocolType": "transfer_proto_required_error3",
            "TransferMethod": "transfer_method_required_error",
            "UserName": "credentials_required_error",
            "Password": "credentials_required_error",
        }.get(name)
        body = copy.deepcopy(self.samples.get(sample)) if sample else None
        if body is None:
            body = base_error("ActionParameterMissing", f"The action InsertMedia requires the parameter {name} to be present in the request body.", ["InsertMedia", name], [f"#/{name}"])
        r = Reply(400, body)
        r.rule = f"--require-insert-param {name}"
        return r

    def action_info(self, res_path, action):
        act = (self.res[res_path].get("Actions") or {}).get(action) or {}
        info = act.get("@Redfish.ActionInfo")
        return self.res.get(info.rstrip("/")) if info else None

    def allowed_resets(self):
        act = (self.system().get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        vals = act.get("ResetType@Redfish.AllowableValues")
        if vals is None:
            info = self.action_info(self.system_path, "#ComputerSystem.Reset") or {}
            for p in info.get("Parameters", []):
                if p.get("Name") == "ResetType":
                    vals = p.get("AllowableValues")
        return vals

    def reset(self, res_path, params):
        rtype = params.get("ResetType")
        if rtype is None:
            return Reply(400, base_error("ActionParameterMissing", "The action Reset requires the parameter ResetType to be present in the request body.", ["Reset", "ResetType"], ["#/ResetType"]))
        allowed = self.allowed_resets()
        if allowed is not None and rtype not in allowed:
            return Reply(400, base_error("ActionParameterNotSupported", f"The parameter ResetType for the action Reset is not supported on the target resource: {rtype}.", ["ResetType", "Reset"], ["#/ResetType"]))
        self.resets.append(rtype)
        sysobj = self.system()
        on = sysobj.get("PowerState") == "On"
        if rtype in ("ForceOff", "GracefulShutdown"):
            sysobj["PowerState"] = "Off"
            self.in_post = False
        elif rtype == "Nmi":
            pass
        elif rtype == "PushPowerButton":
            if on:
                sysobj["PowerState"] = "Off"
            else:
                self.boot(rtype)
        elif rtype in ("On", "ForceOn"):
            if not on:
                self.boot(rtype)
        else:  # ForceRestart, GracefulRestart, PowerCycle, ACPowerCycle...
            self.boot(rtype)
        self.changed(self.system_path)
        return self.ok_action()

    def vcd_target(self):
        # sushy constants.py USB_CD: Supermicro's virtual media is "UsbCd".
        return "UsbCd" if self.vendor == "supermicro" else "Cd"

    def boot(self, reset_type):
        sysobj = self.system()
        sb = sysobj["Boot"]
        if self.pending:
            sb.update(self.pending)
            self.pending = None
        sysobj["PowerState"] = "On"
        enabled = sb.get("BootSourceOverrideEnabled")
        target = sb.get("BootSourceOverrideTarget") if enabled in ("Once", "Continuous") else None
        source = "disk"
        if target == self.vcd_target():
            for s in self.slots:
                o = self.res[s]
                if self.cd_capable(s) and o.get("Inserted") and o.get("Image"):
                    source = o["Image"]
                    break
        elif target == "Pxe":
            source = "pxe"
        self.booted_from.append(source)
        self.boots.append(
            {
                "source": source,
                "target": target,
                "enabled": enabled,
                "mode": sb.get("BootSourceOverrideMode"),
                "reset": reset_type,
            }
        )
        if enabled == "Once":
            sb["BootSourceOverrideEnabled"] = "Disabled"
            sb["BootSourceOverrideTarget"] = "None"
        if self.vendor == "hpe":
            self.in_post = True

    def write_log(self, method, path, body, status, rule):
        if not self.log:
            return
        if isinstance(body, dict) and "Password" in body:
            body = {**body, "Password": "<redacted>"}
        entry = {"method": method, "path": path, "body": body, "status": status}
        if rule:
            entry["rule"] = rule
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()


# --------------------------------------------------------------------------
# HTTP front end
# --------------------------------------------------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "bmcsim/1"
    sim: Sim = None  # set in main

    def setup(self):
        super().setup()
        self.request.settimeout(30)
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError):
            self.close_connection = True
            raise

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    MAX_BODY = 1 << 20

    def read_body(self):
        """The request body (Content-Length or chunked); ValueError when bad."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline(64).split(b";")[0].strip() or b"x", 16)
                if size == 0:
                    while self.rfile.readline(1024).strip():
                        pass  # trailers
                    return out
                out += self.rfile.read(size)
                self.rfile.readline(8)
                if len(out) > self.MAX_BODY:
                    raise ValueError("body too large")
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > self.MAX_BODY:
            raise ValueError("bad Content-Length")
        return self.rfile.read(n) if n > 0 else b""

    def send(self, status, body, headers):
        data = b"" if body is None else json.dumps(body, indent=1).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json;charset=utf-8")
            self.send_header("OData-Version", "4.0")
        if status != 204:  # RFC 9110 8.6: no Content-Length on a 204
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def serve(self):
        try:
            raw = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self.send(400, base_error("MalformedJSON", "The request body could not be read."), {"Connection": "close"})
            return
        path = norm_path(self.path)
        sim = self.sim
        if path == "/_sim/state" and self.command == "GET":
            with sim.lock:
                st = sim.state()
            self.send(200, st, {})
            return
        with sim.lock:
            try:
                reply = sim.handle(self.command, path, self.headers, raw)
            except Exception as e:  # a simulator bug: say so, keep serving
                import traceback

                traceback.print_exc()
                reply = Reply(500, status_error(500), rule=f"bmcsim bug: {e!r}")
            parsed = None
            if raw:
                try:
                    parsed = json.loads(raw)
                except (ValueError, UnicodeDecodeError):
                    parsed = None
            sim.write_log(self.command, path, parsed, reply.status if reply.status is not None else 0, reply.rule)
        if reply.status is None:  # drop
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.send(reply.status, reply.body, reply.headers)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = serve


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # TLS handshakes that fail and clients that hang up are not errors here.
        pass


def main(argv=None):
    p = argparse.ArgumentParser(description="test BMC serving a recorded Redfish tree")
    p.add_argument("--tree", required=True)
    p.add_argument("--vendor", required=True, choices=VENDORS)
    p.add_argument("--openbmc-rules", action="store_true")
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--log")
    p.add_argument("--fault", action="append")
    p.add_argument("--initial-power", choices=("On", "Off"))
    p.add_argument("--foreign-image")
    p.add_argument("--require-insert-param", action="append")
    p.add_argument("--errors", default=DEFAULT_ERRORS)
    p.add_argument("--fetch-images", action="store_true")
    p.add_argument("--strict", action="store_true")
    args = p.parse_args(argv)
    try:
        sim = Sim(args)
    except ValueError as e:
        p.error(str(e))
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    if host and ":" in host:
        Server.address_family = socket.AF_INET6
    Handler.sim = sim
    srv = Server((host, int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    print(f"READY {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
