"""A mirror token given as a build secret never reaches the build log or the error on stderr.

The real `build` edge (BuildKit through the engine's CLI) runs a small context FROM the real
cpu-debian12 image whose RUN step does what pip does with an index URL: prints "Looking in
indexes: URL" and, when the index answers badly or not at all, names the URL again in its
warnings. Once with an index that is reachable on 127.0.0.1 (it answers 404) and once with one
that is not (a port nothing listens on); both fail the build, as a wrong mirror does.
"""

from __future__ import annotations

import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.docker

TOKEN = "glpat-Zq9sEcReTtOkEn1234"
# RUN_ID: BuildKit runs identical steps of concurrent builds once, and shows the output to one of
# them: a step unique to this build keeps its log its own when suites share an engine
STEP = r'''FROM {image}
USER 0
ENV RAPIDSHIP_TEST_BUILD={run_id}
RUN --mount=type=secret,id=pip-index,required=true \
    python -c "import sys, urllib.request; url = open('/run/secrets/pip-index').read().strip(); \
print('Looking in indexes: ' + url); \
exec('try:\n urllib.request.urlopen(url + \'/dask/\', timeout=5)\nexcept Exception as err:\n print(\'WARNING: Retrying after connection broken by %r: %s/dask/\' % (err, url))'); \
sys.exit(1)"
'''


class NotFound(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def reachable():
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://ci-bot:{TOKEN}x@127.0.0.1:{server.server_address[1]}/simple?private_token={TOKEN}"
    server.shutdown()


@pytest.fixture
def unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    return f"https://127.0.0.1:{port}/simple?private_token={TOKEN}"


@pytest.mark.parametrize("index", ["reachable", "unreachable"])
def test_a_token_in_the_index_url_is_scrubbed_from_log_and_error(cpu_image, tmp_path, index, request):
    from rapidship.imagebuild.buildkit import BuildPlan, BuildSecrets, build
    from rapidship.config.matrix import load_matrix
    from rapidship.errors import RapidshipError
    from support.commands import ROOT

    url = request.getfixturevalue(index)
    (tmp_path / "Dockerfile").write_text(STEP.format(image=cpu_image.ref, run_id=uuid.uuid4().hex))
    plan = BuildPlan(variant="cpu-debian12", arch="amd64", ref=f"rapidship-test-scrub:{index}",
                     name=f"rapidship-test-scrub:{index}", context=str(tmp_path),
                     labels={}, secret_ids=("pip-index",), target="", network="host", no_cache=True)
    log = tmp_path / "build.log"
    variant = load_matrix(ROOT / "variants.yaml").get("cpu-debian12")
    with pytest.raises(RapidshipError) as failed:
        build(plan, BuildSecrets(pip_index=url), variant, log)
    text = log.read_text()
    assert "Looking in indexes: http" in text and "WARNING: Retrying" in text  # the step ran and printed
    assert TOKEN not in text and TOKEN not in str(failed.value), text[-2000:]
    assert "private_token=***" in text and "/simple" in text  # still says which index
