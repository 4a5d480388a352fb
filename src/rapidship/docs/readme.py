"""The README's picture of the pipeline and its variant table, from the code that they describe:
the record paths are the workspace's own (records.py), the variants and what each needs are the
matrix's (config/)."""

from __future__ import annotations

from rapidship.config.matrix import Matrix
from rapidship.config.needs import missing_here
from rapidship.docs.figures import ImageSize, measured
from rapidship.records import Workspace

V, A = "{v}", "{a}"
W = Workspace("build")
# (task, the record it writes, what it does): in the order a release runs them
STAGES = [
    ("render", W.render(V), "Dockerfile + context from templates/ and locks/"),
    ("build", W.build(V, A), "BuildKit; device code pruned to gpu_archs; one image id per commit"),
    ("gates", W.gates(V, A), "size, labels, user, suid, secrets over one read"),
    ("scan", W.decision(V, A), "trivy + policy/trivy.yaml (threshold, allowlist with expiry)"),
    ("push", W.push(V), "per-arch push, then one manifest list: only when gated and scanned"),
    ("sign", W.sign(V), "cosign signature, SBOM, SLSA provenance on every digest"),
    ("smoke", W.smoke_dir() / "*.json", "spill smoke under the hardened profile (cgroup cap, random uid)"),
    ("export", "<out>/export.json", "signed ISO volumes ─▶ the air-gapped site: import verifies, then loads"),
    ("deploy", "build/deploy-<target>/", "Compose / Kubernetes by digest, sized by the doctor's rules"),
    ("report", "build/report/index.html", "every record above on one self-contained page"),
]


def pipeline_picture() -> str:
    width = max(len(str(r)) for _, r, _ in STAGES)
    lines = ["variants.yaml  (the matrix: CUDA x OS x arch x Python x RAPIDS, gpu_archs)", "  │"]
    for i, (task, record, what) in enumerate(STAGES):
        branch = "└─" if i == len(STAGES) - 1 else "├─"
        lines.append(f"  {branch} invoke {task:<7}─▶ {str(record):<{width}}  {what}")
    return "```text\n" + "\n".join(lines) + "\n```"


def variant_table(m: Matrix, images: dict[str, ImageSize]) -> str:
    rows = ["| variant | CUDA | OS | arches | env | `gpu_archs` | builds with only PyPI + Debian's archive | measured |",
            "|---|---|---|---|---|---|---|---|"]
    for v in m.variants.values():
        lacking = missing_here(v)
        where = "yes" if not lacking else "no: needs " + " and ".join(n.what for n in lacking)
        rows.append(f"| `{v.id}` | {v.cuda or '-'} | {v.distro.capitalize()} {v.os_version} | "
                    f"{', '.join(a.value for a in v.arches)} | {v.flavour.value} | {v.gpu_archs_label()} | {where} | "
                    f"{measured(images, v.id, v.gpu_archs)} |")
    return "\n".join(rows)
