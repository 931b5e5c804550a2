//! `crc-appliance render csr-rbac`: the least-privilege identity the CSR
//! approver can run with instead of the installer's admin kubeconfig.
//!
//! Exactly the rights of issue #37 item 1: get/list/watch CSRs and Nodes,
//! update `certificatesigningrequests/approval`, `approve` on `signers`
//! limited by `resourceNames` to the two kubelet signers, and get the one
//! secret of the day-2 join (`openshift-machine-api/worker-user-data-managed`,
//! a Role in that namespace, not a cluster-wide grant). [`RIGHTS`] lists
//! them for the missing-right check.

/// The ServiceAccount's namespace and name.
pub const NAMESPACE: &str = "openshift-machine-api";
pub const ACCOUNT: &str = "crc-appliance-csr-approver";
/// The secret holding the cluster's current worker pointer config.
pub const USER_DATA_SECRET: &str = "worker-user-data-managed";

/// One right the approver needs: (verb, API group, resource, name).
pub type Right = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
);

/// Every right, in the order the watcher needs them.
pub const RIGHTS: [Right; 10] = [
    (
        "list",
        "certificates.k8s.io",
        "certificatesigningrequests",
        None,
    ),
    (
        "watch",
        "certificates.k8s.io",
        "certificatesigningrequests",
        None,
    ),
    (
        "update",
        "certificates.k8s.io",
        "certificatesigningrequests/approval",
        None,
    ),
    (
        "approve",
        "certificates.k8s.io",
        "signers",
        Some(super::rules::CLIENT_SIGNER),
    ),
    (
        "approve",
        "certificates.k8s.io",
        "signers",
        Some(super::rules::SERVING_SIGNER),
    ),
    ("list", "", "nodes", None),
    ("watch", "", "nodes", None),
    (
        "get",
        "certificates.k8s.io",
        "certificatesigningrequests",
        None,
    ),
    ("get", "", "nodes", None),
    // In NAMESPACE only (a Role): the day-2 workers' pointer config.
    ("get", "", "secrets", Some(USER_DATA_SECRET)),
];

/// The YAML `render csr-rbac` prints (`oc apply -f -`).
pub fn render() -> String {
    format!(
        r#"# The CSR approver's identity (docs/operations.md, "CSR approval").
# Apply with `oc apply -f`, then make its kubeconfig from the token secret.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {ACCOUNT}
  namespace: {NAMESPACE}
---
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata:
  name: {ACCOUNT}-token
  namespace: {NAMESPACE}
  annotations:
    kubernetes.io/service-account.name: {ACCOUNT}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {ACCOUNT}
rules:
- apiGroups: ["certificates.k8s.io"]
  resources: ["certificatesigningrequests"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["certificates.k8s.io"]
  resources: ["certificatesigningrequests/approval"]
  verbs: ["update"]
- apiGroups: ["certificates.k8s.io"]
  resources: ["signers"]
  resourceNames: ["{client}", "{serving}"]
  verbs: ["approve"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {ACCOUNT}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {ACCOUNT}
subjects:
- kind: ServiceAccount
  name: {ACCOUNT}
  namespace: {NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {ACCOUNT}
  namespace: {NAMESPACE}
rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["{USER_DATA_SECRET}"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {ACCOUNT}
  namespace: {NAMESPACE}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {ACCOUNT}
subjects:
- kind: ServiceAccount
  name: {ACCOUNT}
  namespace: {NAMESPACE}
"#,
        client = super::rules::CLIENT_SIGNER,
        serving = super::rules::SERVING_SIGNER,
    )
}
