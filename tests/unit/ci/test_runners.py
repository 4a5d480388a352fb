"""protected-runners (release jobs and every job with a protected secret): GitLab's runner API,
served on loopback as its REST reference describes it
(`GET /projects/:id/runners?tag_list=`, `GET /runners/:id` with tag_list, access_level, run_untagged,
status), asked the way the CI job asks it. A release tag carried only by protected online runners
passes; none, only offline or paused ones, an unprotected one, a runner that also takes untagged
jobs, a token GitLab refuses, or no token at all: one sentence each, and the tag named."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from rapidship.ci import runners as r
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from support.commands import ROOT

TOKEN = "glpat-test-token-0123456789"


def runner(id_, tags, protected=True, status="online", paused=False, untagged=False, description=None):
    return {"id": id_, "description": description or f"runner {id_}", "status": status, "online": status == "online",
            "paused": paused, "tag_list": list(tags), "run_untagged": untagged,
            "access_level": "ref_protected" if protected else "not_protected", "runner_type": "project_type"}


class FakeGitLab:
    """The two runner endpoints, for project 42, behind a PRIVATE-TOKEN."""

    def __init__(self, runners: list[dict], token: str = TOKEN) -> None:
        self.runners, self.token, self.requests = runners, token, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # noqa: D401 - quiet
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                outer.requests.append((url.path, parse_qs(url.query), self.headers.get("PRIVATE-TOKEN")))
                if self.headers.get("PRIVATE-TOKEN") != outer.token:
                    return self._send(401, {"message": "401 Unauthorized"})
                if url.path == "/api/v4/projects/42/runners":
                    query = parse_qs(url.query)
                    tag = query.get("tag_list", [""])[0]
                    page, per = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["20"])[0])
                    listed = [{k: x[k] for k in ("id", "description", "status", "online", "paused")}
                              for x in outer.runners if tag in x["tag_list"]]
                    return self._send(200, listed[(page - 1) * per:page * per])
                if url.path.startswith("/api/v4/runners/"):
                    found = [x for x in outer.runners if str(x["id"]) == url.path.rsplit("/", 1)[1]]
                    return self._send(200, found[0]) if found else self._send(404, {"message": "404 Not found"})
                return self._send(404, {"message": "404 Not found"})

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.env = {"CI_API_V4_URL": f"http://127.0.0.1:{self.server.server_port}/api/v4", "CI_PROJECT_ID": "42",
                    r.TOKEN_ENV: token}

    def close(self):
        self.server.shutdown()


@pytest.fixture
def gitlab():
    made = []

    def make(runners, token=TOKEN):
        made.append(FakeGitLab(runners, token))
        return made[-1]

    yield make
    for g in made:
        g.close()


def test_protected_online_runners_with_the_tag_pass(gitlab):
    api = gitlab([runner(1, ["release", "amd64", "docker"]), runner(2, ["amd64", "docker"], protected=False)])
    found = r.require("release", api.env)
    assert [x.id for x in found] == [1] and found[0].protected and found[0].online
    assert all(token == TOKEN for _, _, token in api.requests)


@pytest.mark.parametrize("runners, said", [
    ([], "no protected runner carrying the tag release is online"),
    ([runner(1, ["release"], status="offline")], "no protected runner carrying the tag release is online"),
    ([runner(1, ["release"], paused=True)], "no protected runner carrying the tag release is online"),
    ([runner(1, ["release"]), runner(7, ["release", "amd64"], protected=False, description="shared-build-host")],
     "runner 7 (shared-build-host) carries the tag release but is not protected, so merge-request jobs"),
    ([runner(1, ["release"], untagged=True)], "runner 1 (runner 1) carries the tag release and also runs untagged jobs"),
])
def test_missing_or_unsafe_release_runners_fail_naming_the_tag(gitlab, runners, said):
    api = gitlab(runners)
    with pytest.raises(GateFailure) as err:
        r.require("release", api.env)
    assert said in err.value.message and "release" in err.value.where and TOKEN not in err.value.message


def test_more_runners_than_one_page_are_all_read(gitlab):
    api = gitlab([runner(i, ["release"], protected=i != 150) for i in range(1, 160)])
    with pytest.raises(GateFailure, match="runner 150 .* is not protected"):
        r.require("release", api.env)
    assert {q.get("page", [""])[0] for path, q, _ in api.requests if path.endswith("/42/runners")} == {"1", "2"}


def test_no_token_no_api_and_a_refused_token_fail_closed(gitlab):
    api = gitlab([runner(1, ["release"])])
    with pytest.raises(ConfigError) as err:
        r.require("release", {**api.env, r.TOKEN_ENV: ""})
    assert err.value.where == r.TOKEN_ENV and "read_api" in err.value.fix
    with pytest.raises(ConfigError, match="inside a GitLab CI job"):
        r.require("release", {r.TOKEN_ENV: TOKEN})
    with pytest.raises(RapidshipError) as err:
        r.require("release", {**api.env, r.TOKEN_ENV: "glpat-wrong"})
    assert "HTTP 401" in err.value.message and "read_api" in err.value.fix and "glpat-wrong" not in err.value.message


def test_the_task_is_one_clear_line_and_exits_1(gitlab):
    import os

    api = gitlab([])
    proc = subprocess.run(["invoke", "ci.runners", "--require", "release"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **api.env})
    assert proc.returncode == 1 and proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert "no protected runner carrying the tag release is online" in proc.stderr and TOKEN not in proc.stderr


# ---- the generated pipeline: every job with a protected secret on protected runners ----

POOL = [runner(10, ["amd64", "protected"]), runner(11, ["amd64", "docker", "protected"]),
        runner(12, ["arm64", "protected"]), runner(13, ["arm64", "docker", "protected"]),
        runner(14, ["gpu", "amd64", "protected"]), runner(15, ["gpu", "arm64", "protected"]),
        runner(20, ["amd64", "release"]), runner(21, ["amd64", "docker", "release"]),
        runner(30, ["amd64", "docker"], protected=False, description="merge-request pool")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """What the parent's generate jobs write (the real producer), per kind of ref."""
    out = {}
    for refs in ("protected", "unprotected"):
        path = tmp_path_factory.mktemp("child") / f"{refs}.yml"
        subprocess.run(["invoke", "ci.generate", "--refs", refs, "--variant", "cpu-debian12", "--out", str(path)],
                       cwd=ROOT, check=True, capture_output=True)
        out[refs] = path
    return out


def runners_task(env: dict, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["invoke", "ci.runners", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env})


def test_the_generated_files_pass_offline_and_with_every_pool_online(gitlab, generated):
    for path in generated.values():
        proc = runners_task({}, "--pipeline", str(path), "--offline")
        assert proc.returncode == 0 and "every job with a protected secret carries a protected runner tag" \
            in proc.stderr, proc.stderr
    api = gitlab(POOL)
    proc = runners_task(api.env, "--pipeline", str(generated["protected"]))
    assert proc.returncode == 0 and "8 protected runner(s) online" in proc.stderr, proc.stderr
    assert {q["tag_list"][0] for path, q, _ in api.requests if path.endswith("/42/runners")} == {"protected", "release"}


def test_a_job_no_protected_runner_takes_is_named(gitlab, generated):
    api = gitlab([r for r in POOL if r["id"] != 15])   # no protected GPU runner for arm64
    proc = runners_task(api.env, "--pipeline", str(generated["protected"]))
    assert proc.returncode == 1 and proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert "job smoke:cpu-debian12:arm64: no protected online runner carries all of its tags (gpu, arm64, " \
           "protected)" in proc.stderr, proc.stderr


def test_an_unprotected_runner_with_the_protected_tag_fails(gitlab, generated):
    api = gitlab([*POOL, runner(31, ["amd64", "docker", "protected"], protected=False, description="shared-host")])
    proc = runners_task(api.env, "--pipeline", str(generated["protected"]))
    assert proc.returncode == 1 and "runner 31 (shared-host) carries the tag protected but is not protected" \
        in proc.stderr, proc.stderr


def test_a_job_with_a_protected_secret_but_no_protected_tag_fails_before_asking(gitlab, generated, tmp_path):
    import yaml

    doc = yaml.safe_load(generated["protected"].read_text())
    doc["gates:cpu-debian12:arm64"]["tags"] = ["arm64", "docker"]   # back on the shared engine
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    api = gitlab(POOL)
    for args in (("--offline",), ()):
        proc = runners_task(api.env, "--pipeline", str(bad), *args)
        assert proc.returncode == 1 and proc.stderr.count("error:") == 1, proc.stderr
        assert "job gates:cpu-debian12:arm64 receives a protected secret (environment ci-build" in proc.stderr
    assert api.requests == []   # the file fails first: GitLab is never asked
