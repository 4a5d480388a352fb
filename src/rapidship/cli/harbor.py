"""`invoke harbor.*`: Harbor as configuration (plan, apply) and the Harbor-side scan gate."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import int_flag
from rapidship.console import on_retry
from rapidship.errors import GateFailure, exits_cleanly
from rapidship.records import Workspace, save


def _harbor_plan(c, config="harbor", url=None, json=False):
    """Show what `harbor.apply` would change in the live Harbor (writes build/harbor/plan.json)."""
    from rapidship.publish.harbor.client import HarborClient
    from rapidship.publish.harbor.apply import change_record, plan
    from rapidship.publish.harbor.config import load_harbor

    cfg = load_harbor(config)
    changes, _ = plan(HarborClient.from_env(cfg, url, on_retry=on_retry), cfg)
    records = [change_record(ch) for ch in changes]
    save(Workspace().harbor_dir() / "plan.json", {"changes": records})
    if json:
        console.print_json({"changes": records})
    for ch in changes:
        console.err.print(ch.summary())
    console.err.print(f"{len(changes)} change(s)" if changes else "no changes: Harbor matches the configuration")
def _harbor_apply(c, config="harbor", url=None, secrets_file=None, print_secrets=False):
    """Make the live Harbor match harbor/ (idempotent). New robot secrets go to a 0600 file."""
    import os

    from rapidship.publish.harbor.client import HarborClient
    from rapidship.publish.harbor.apply import SecretSink, apply, change_record, plan
    from rapidship.publish.harbor.config import load_harbor

    cfg = load_harbor(config)
    client = HarborClient.from_env(cfg, url, on_retry=on_retry)
    changes, live = plan(client, cfg)
    default = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "rapidship" / "robot-secrets.json"
    sink = SecretSink(Path(secrets_file) if secrets_file else (None if print_secrets else default), print_secrets)
    done = apply(client, cfg, changes, live, sink, on_change=lambda ch: console.err.print(f"done: {ch.summary()}"))
    save(Workspace().harbor_dir() / "apply.json", {"applied": [change_record(ch) for ch in done]})
    if sink.secrets and sink.path:
        console.err.print(f"{len(sink.secrets)} new robot secret(s) written to {sink.path} (mode 0600)")
    console.err.print(f"{len(done)} change(s) applied" if done else "no changes: Harbor matches the configuration")


_HARBOR_HELP = {"config": "harbor configuration directory (default harbor)",
                "url": "Harbor URL (default $RAPIDSHIP_HARBOR_URL, else harbor.yaml url)"}


harbor_tasks = Collection("harbor")
harbor_tasks.add_task(task(help={**_HARBOR_HELP, "json": "print the changes as JSON on stdout"})(
    exits_cleanly(_harbor_plan)), name="plan")
harbor_tasks.add_task(task(help={**_HARBOR_HELP, "secrets-file": "where new robot secrets go (0600; default "
                                 "~/.config/rapidship/robot-secrets.json)",
                                 "print-secrets": "print new robot secrets once on stdout instead"})(
    exits_cleanly(_harbor_apply)), name="apply")
def _harbor_scan(c, variant="cpu-debian12", policy="policy/trivy.yaml", config="harbor", url=None, build_dir="build",
                 timeout="900"):  # str: see options.int_flag
    """Scan each pushed arch in Harbor, wait, and apply the policy to Harbor's report."""
    from datetime import date

    from rapidship.gates.policy import load_policy, report_decider
    from rapidship.publish.harbor.client import HarborClient
    from rapidship.gates.harbor import scan_gate
    from rapidship.publish.harbor.config import load_harbor
    from rapidship.publish.push import gated_records, read_push_record

    ws = Workspace(build_dir)
    out = ws.variant_dir(variant)
    record = read_push_record(ws, variant)
    problems = gated_records(ws, record)
    if problems:  # a Harbor pass must not stand for images whose own gates were of another build
        raise GateFailure("harbor gate", f"{variant}: the pushed images are not the ones the records gated:\n  "
                          + "\n  ".join(problems), "gate, scan and push the same build again, then run invoke harbor.scan")
    project, _, repository = record.repository.partition("/")
    client = HarborClient.from_env(load_harbor(config), url, on_retry=on_retry)
    decide = report_decider(load_policy(policy, variant), date.today())
    results = []
    for arch, image in sorted(record.arches.items()):
        with console.status(f"Harbor scan of {record.repository}@{image.digest[:19]} ({arch})"):
            results.append(scan_gate(client, project, repository, image.digest, decide, timeout=float(int_flag("--timeout", timeout))))
    passed = all(r.passed for r in results)
    path = save(out / "harbor-gate.json", {"variant": variant, "passed": passed, "scans": results})
    for r in results:
        console.err.print(f"{'PASS' if r.passed else 'FAIL'} {r.repository}@{r.digest[:19]}: "
                          + ("; ".join(r.decision.get("reasons", [])[:5]) or "no blocking findings"))
    if not passed:
        raise GateFailure("harbor gate", f"{variant} failed Harbor's scan under {policy}", f"see {path}")


harbor_tasks.add_task(task(help={**_HARBOR_HELP, "variant": "variant whose push record (build/<variant>/push.json) to scan",
                                 "policy": "policy file (default policy/trivy.yaml)", "build-dir": "where records live",
                                 "timeout": "seconds to wait for each scan"})(exits_cleanly(_harbor_scan)), name="scan")
