"""NetworkPolicy and PodDisruptionBudget semantics, evaluated over manifests where no cluster can be
had: what the API reference of networking.k8s.io/v1 and policy/v1 says a CNI and the eviction API
do with them, so a test asks "may this pod reach that one" instead of comparing selectors.

- A pod is isolated for a direction when a policy of its namespace selects it with that direction
  in policyTypes (absent: Ingress, plus Egress when the policy has egress rules); a connection then
  needs a rule of one such policy that matches the peer and the destination's port. Both the
  source's egress and the destination's ingress must allow it.
- A peer with podSelector alone means pods of the policy's namespace; namespaceSelector alone,
  every pod of the namespaces it selects; both in one peer, those pods in those namespaces. Every
  namespace carries `kubernetes.io/metadata.name: <its name>` (the API server sets it).
- ports: absent or empty, any; a named port is the destination container's; endPort a range.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

NAMESPACE_NAME = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict = field(default_factory=dict)
    ports: dict = field(default_factory=dict)            # named container ports: name -> number
    namespace_labels: dict = field(default_factory=dict)  # besides kubernetes.io/metadata.name
    ready: bool = True

    def namespace_view(self) -> dict:
        return {**self.namespace_labels, NAMESPACE_NAME: self.namespace}


@dataclass(frozen=True)
class External:
    ip: str


def selects(selector: dict | None, labels: dict) -> bool:
    """A LabelSelector: {} selects everything, matchLabels and matchExpressions all must hold."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not held:
            return False
    return True


def _peer(peer: dict, other: Pod | External, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        if not isinstance(other, External):
            return False
        ip, block = ipaddress.ip_address(other.ip), peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(x) for x in block.get("except") or [])
    if isinstance(other, External):
        return False
    if "namespaceSelector" in peer:
        in_namespace = selects(peer["namespaceSelector"], other.namespace_view())
    else:
        in_namespace = other.namespace == policy_namespace
    return in_namespace and ("podSelector" not in peer or selects(peer["podSelector"], other.labels))


def _port(ports: list[dict] | None, number: int, protocol: str, destination: Pod | External) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        want = p["port"]
        if isinstance(want, str):
            want = destination.ports.get(want) if isinstance(destination, Pod) else None
        if want is not None and want <= number <= p.get("endPort", want):
            return True
    return False


def _types(policy: dict) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _direction(policies: list[dict], namespace: str, subject: Pod | External, other: Pod | External,
               destination: Pod | External, number: int, protocol: str, kind: str) -> bool:
    if isinstance(subject, External):
        return True   # not a pod: no policy of ours applies
    key, peers_key = ("egress", "to") if kind == "Egress" else ("ingress", "from")
    applying = [p for p in policies if p.get("kind") == "NetworkPolicy"
                and (p["metadata"].get("namespace") or namespace) == subject.namespace
                and selects(p["spec"].get("podSelector"), subject.labels) and kind in _types(p)]
    if not applying:
        return True
    return any((not rule.get(peers_key) or any(_peer(x, other, p["metadata"].get("namespace") or namespace)
                                               for x in rule[peers_key]))
               and _port(rule.get("ports"), number, protocol, destination)
               for p in applying for rule in p["spec"].get(key) or [])


def allowed(policies: list[dict], namespace: str, source: Pod | External, destination: Pod | External,
            port: int, protocol: str = "TCP") -> bool:
    """May `source` open a connection to `destination`'s port, with `policies` applied in `namespace`?"""
    return (_direction(policies, namespace, source, destination, destination, port, protocol, "Egress")
            and _direction(policies, namespace, destination, source, destination, port, protocol, "Ingress"))


def evictable(budget: dict, pods: list[Pod], victim: Pod) -> bool:
    """Would the eviction API let `victim` go now (policy/v1)? For maxUnavailable the expected count
    is the pods' controllers' replicas: one per selected pod here (each runs in its own Deployment
    or one Deployment of that many). A pod that is not Ready goes when the budget's
    unhealthyPodEvictionPolicy is AlwaysAllow, else only while the budget holds."""
    spec = budget["spec"]
    chosen = [p for p in pods if p.namespace == victim.namespace and selects(spec["selector"], p.labels)]
    if victim not in chosen:
        return True
    healthy = sum(p.ready for p in chosen)
    desired = len(chosen) - int(spec["maxUnavailable"]) if "maxUnavailable" in spec else int(spec["minAvailable"])
    if not victim.ready:   # IfHealthyBudget (the default): only while the budget holds
        return spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or healthy >= desired
    return healthy - desired > 0
