"""HTML reports opened in a real headless Chromium: they load without errors, every figure has a size,
and no figure stands beside an empty half of the page.

Needs the ``playwright`` Python package (``pip install playwright``) and a Chromium executable:
Debian's ``chromium`` package (``apt-get install chromium``), a ``chromium-browser`` or
``google-chrome`` on the PATH, the path in ``LATENTZOO_CHROMIUM``, or a browser that
``python -m playwright install chromium`` downloaded. Without them the tests are skipped, with the
reason.
"""

import os
import shutil
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from inference.diagnostics import MixingWarning
from inference.em import tempered_em
from test_report import _chains  # Gibbs chains with label switching
from zoo.data import CoOccurrence
from zoo.dirichlet import DPMixture, normal_gamma
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.cluster_abstraction import ClusterAbstraction
from zoo.relational import InfiniteRelational, LatentClassRelational, load_florentine_families
from zoo.report import write_report

sync_api = pytest.importorskip("playwright.sync_api", exc_type=ImportError,
                               reason="the playwright package is not installed (pip install playwright)")

pytestmark = pytest.mark.browser

#: Chromium flags for a machine without network: no background connections, no sandbox as root.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

#: Per figure: its size, whether its image decoded, and the share of the content width that
#: figures, tables and class cards cover along the horizontal line through its middle.
PROBE = """() => {
  const content = document.querySelector("h1").getBoundingClientRect();
  const boxes = [...document.querySelectorAll("img, svg, canvas, table, .class-card")]
    .map((element) => element.getBoundingClientRect());
  return [...document.querySelectorAll("img, svg, canvas")].map((element) => {
    const box = element.getBoundingClientRect();
    const middle = box.top + box.height / 2;
    const spans = boxes.filter((other) => other.top <= middle && other.bottom >= middle)
      .map((other) => [Math.max(other.left, content.left), Math.min(other.right, content.right)])
      .sort((a, b) => a[0] - b[0]);
    let covered = 0, reach = content.left;
    for (const [left, right] of spans) {
      if (right > reach) { covered += right - Math.max(left, reach); reach = right; }
    }
    return {name: element.getAttribute("alt") || element.tagName, width: box.width, height: box.height,
            decoded: element.tagName !== "IMG" || (element.complete && element.naturalWidth > 0),
            covered: covered / content.width};
  });
}"""


def _chromium() -> str | None:
    candidates = [os.environ.get("LATENTZOO_CHROMIUM")]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome",
                                                   "google-chrome-stable")]
    return next((path for path in candidates if path and Path(path).is_file()), None)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        executable = _chromium()
        if executable is None and not Path(playwright.chromium.executable_path).is_file():
            pytest.skip("no Chromium to run: apt-get install chromium, or set LATENTZOO_CHROMIUM")
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except sync_api.Error as error:
            pytest.skip(f"Chromium does not start here: {str(error).splitlines()[0]}")
        yield browser
        browser.close()


def _open(browser, path: Path, width: int = 1280):
    """Load ``path``; return the page and the errors seen (console errors and warnings, uncaught
    exceptions, failed requests)."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors = []
    page.on("console", lambda message: errors.append(f"console {message.type}: {message.text}")
            if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url[:80]}"))
    page.goto(path.resolve().as_uri(), wait_until="load")
    return page, errors


def _reports(directory: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    words = [f"word{index}" for index in range(30)]
    counts = rng.poisson(0.3, size=(24, 30))
    counts[:12, :5] += 3
    counts[12:, 5:10] += 3
    data = CoOccurrence.from_dense(counts, col_names=words)
    aspect = tempered_em(Aspect(3, backend="xla"), data, key=jax.random.key(0), max_iter=40)
    tree = tempered_em(ClusterAbstraction(depth=2, backend="xla"), data, key=jax.random.key(1), max_iter=5)
    families = load_florentine_families()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # short chains
        irm = InfiniteRelational().sample(families, jax.random.key(3), n_chains=2, n_draws=40, n_warmup=40,
                                          progress=False)
        points = np.concatenate([rng.normal(-3.0, 1.0, (15, 5)), rng.normal(3.0, 1.0, (15, 5))])
        dp = DPMixture(normal_gamma(5)).fit(points, jax.random.key(4), n_chains=2, n_warmup=20, n_draws=40,
                                            progress=False)
    return {
        "aspect": write_report(directory / "aspect.html", aspect, data=data),
        "cluster abstraction": write_report(directory / "tree.html", tree),
        "chains": write_report(directory / "chains.html", _chains()),
        "relational": write_report(directory / "lrm.html",
                                   LatentClassRelational(2).fit(families, key=jax.random.key(2)), data=families),
        "irm": write_report(directory / "irm.html", irm, data=families),
        "clusters": write_report(directory / "dp.html", dp, data=points, col_names=[f"x{index}" for index in range(5)]),
    }


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return _reports(tmp_path_factory.mktemp("reports"))


@pytest.mark.parametrize("kind", ["aspect", "cluster abstraction", "chains", "relational", "irm", "clusters"])
def test_report_loads_in_chromium_with_every_figure_drawn(browser, reports, kind):
    page, errors = _open(browser, reports[kind])
    try:
        figures = page.evaluate(PROBE)
        assert errors == []
        assert figures, "the report has no figure"
        for figure in figures:
            assert figure["width"] > 0 and figure["height"] > 0 and figure["decoded"], figure
            # no figure has an empty half of the page beside it
            assert figure["covered"] > 0.6, figure
        if kind == "aspect":
            cards = page.locator(".class-card")
            assert cards.count() == 3 and cards.first.is_visible()
            boxes = [cards.nth(index).bounding_box() for index in range(3)]
            assert len({round(box["y"]) for box in boxes}) == 1  # three cards side by side
    finally:
        page.close()


@pytest.mark.parametrize("kind", ["aspect", "chains", "relational", "irm", "clusters"])
def test_report_fits_a_narrow_window(browser, reports, kind):
    page, errors = _open(browser, reports[kind], width=600)
    try:
        assert errors == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 600  # nothing runs off the side
    finally:
        page.close()
